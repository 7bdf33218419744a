"""Dramatiq's web-crawler example, packaged and tested."""
