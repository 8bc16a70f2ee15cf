from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.parameter_bindings_bindings import ParameterBindingsBindings


T = TypeVar("T", bound="ParameterBindings")


@_attrs_define
class ParameterBindings:
    """
    Attributes:
        bindings (ParameterBindingsBindings):
    """

    bindings: ParameterBindingsBindings

    def to_dict(self) -> dict[str, Any]:
        bindings = self.bindings.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "bindings": bindings,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.parameter_bindings_bindings import ParameterBindingsBindings

        d = dict(src_dict)
        bindings = ParameterBindingsBindings.from_dict(d.pop("bindings"))

        parameter_bindings = cls(
            bindings=bindings,
        )

        return parameter_bindings
