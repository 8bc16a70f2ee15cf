from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="CompleteModelSuccess")


@_attrs_define
class CompleteModelSuccess:
    """
    Attributes:
        finish_reason (str):
        generated_output (str):
    """

    finish_reason: str
    generated_output: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        finish_reason = self.finish_reason

        generated_output = self.generated_output

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "finishReason": finish_reason,
                "generatedOutput": generated_output,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        finish_reason = d.pop("finishReason")

        generated_output = d.pop("generatedOutput")

        complete_model_success = cls(
            finish_reason=finish_reason,
            generated_output=generated_output,
        )

        complete_model_success.additional_properties = d
        return complete_model_success

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
