from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.flagged_content_error_payload_flagged_content_item import (
        FlaggedContentErrorPayloadFlaggedContentItem,
    )


T = TypeVar("T", bound="FlaggedContentErrorPayload")


@_attrs_define
class FlaggedContentErrorPayload:
    """
    Attributes:
        flagged_content (list[FlaggedContentErrorPayloadFlaggedContentItem]):
    """

    flagged_content: list[FlaggedContentErrorPayloadFlaggedContentItem]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        flagged_content = []
        for flagged_content_item_data in self.flagged_content:
            flagged_content_item = flagged_content_item_data.to_dict()
            flagged_content.append(flagged_content_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "flaggedContent": flagged_content,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.flagged_content_error_payload_flagged_content_item import (
            FlaggedContentErrorPayloadFlaggedContentItem,
        )

        d = dict(src_dict)
        flagged_content = []
        _flagged_content = d.pop("flaggedContent")
        for flagged_content_item_data in _flagged_content:
            flagged_content_item = (
                FlaggedContentErrorPayloadFlaggedContentItem.from_dict(
                    flagged_content_item_data
                )
            )

            flagged_content.append(flagged_content_item)

        flagged_content_error_payload = cls(
            flagged_content=flagged_content,
        )

        flagged_content_error_payload.additional_properties = d
        return flagged_content_error_payload

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
