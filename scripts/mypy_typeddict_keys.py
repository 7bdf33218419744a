"""A mypy plugin (pyproject.toml's ``[tool.mypy] plugins``): a TypedDict's ``get`` with
a key the TypedDict does not have is an error, as a subscript with it is.

mypy refuses ``record["outcom"]`` but takes ``record.get("outcom")`` (PEP 589 lets
``get`` take any string, and gives ``object`` back), so a misspelled field read with
``get`` would pass unseen, a check always false.  With this plugin both are
``TypedDict "PageRecord" has no key "outcom"`` (``typeddict-item``).  A key given as a
plain ``str`` is not checked.  mypy's own answer for the value's type is kept.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.plugin import MethodContext, Plugin
from mypy.plugins.common import try_getting_str_literals
from mypy.plugins.default import typed_dict_get_callback
from mypy.types import Type, TypedDictType


def _checked_get(ctx: MethodContext) -> Type:
    """``TypedDict.get``: each literal key it may be given checked, then mypy's type of
    its value (the default plugin's, which this hook stands in for)."""
    if isinstance(ctx.type, TypedDictType) and ctx.args and len(ctx.args[0]) == 1:
        keys = try_getting_str_literals(ctx.args[0][0], ctx.arg_types[0][0]) or []
        for key in keys:
            if key not in ctx.type.items:
                ctx.api.msg.typeddict_key_not_found(ctx.type, key, ctx.context)
    return typed_dict_get_callback(ctx)


class TypedDictKeys(Plugin):
    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        return _checked_get if fullname == "typing.Mapping.get" else None


def plugin(version: str) -> type[Plugin]:
    return TypedDictKeys
