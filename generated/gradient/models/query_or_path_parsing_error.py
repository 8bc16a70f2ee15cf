from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.query_or_path_parsing_error_type import (
    QueryOrPathParsingErrorType,
    check_query_or_path_parsing_error_type,
)

if TYPE_CHECKING:
    from ..models.query_or_path_parsing_error_payload import (
        QueryOrPathParsingErrorPayload,
    )


T = TypeVar("T", bound="QueryOrPathParsingError")


@_attrs_define
class QueryOrPathParsingError:
    """
    Attributes:
        message (str):
        payload (QueryOrPathParsingErrorPayload):
        type_ (QueryOrPathParsingErrorType):
    """

    message: str
    payload: QueryOrPathParsingErrorPayload
    type_: QueryOrPathParsingErrorType
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        message = self.message

        payload = self.payload.to_dict()

        type_: str = self.type_

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "message": message,
                "payload": payload,
                "type": type_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.query_or_path_parsing_error_payload import (
            QueryOrPathParsingErrorPayload,
        )

        d = dict(src_dict)
        message = d.pop("message")

        payload = QueryOrPathParsingErrorPayload.from_dict(d.pop("payload"))

        type_ = check_query_or_path_parsing_error_type(d.pop("type"))

        query_or_path_parsing_error = cls(
            message=message,
            payload=payload,
            type_=type_,
        )

        query_or_path_parsing_error.additional_properties = d
        return query_or_path_parsing_error

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
