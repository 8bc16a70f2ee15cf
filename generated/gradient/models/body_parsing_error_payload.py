from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="BodyParsingErrorPayload")


@_attrs_define
class BodyParsingErrorPayload:
    """
    Attributes:
        formatted_validation_error (Any | Unset):
        validation_error (Any | Unset):
    """

    formatted_validation_error: Any | Unset = UNSET
    validation_error: Any | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        formatted_validation_error = self.formatted_validation_error

        validation_error = self.validation_error

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if formatted_validation_error is not UNSET:
            field_dict["formattedValidationError"] = formatted_validation_error
        if validation_error is not UNSET:
            field_dict["validationError"] = validation_error

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        formatted_validation_error = d.pop("formattedValidationError", UNSET)

        validation_error = d.pop("validationError", UNSET)

        body_parsing_error_payload = cls(
            formatted_validation_error=formatted_validation_error,
            validation_error=validation_error,
        )

        body_parsing_error_payload.additional_properties = d
        return body_parsing_error_payload

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
