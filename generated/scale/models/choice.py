from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.choice_logprobs import ChoiceLogprobs


T = TypeVar("T", bound="Choice")


@_attrs_define
class Choice:
    """
    Attributes:
        index (int):
        logprobs (ChoiceLogprobs | Unset):
    """

    index: int
    logprobs: ChoiceLogprobs | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        index = self.index

        logprobs: dict[str, Any] | Unset = UNSET
        if not isinstance(self.logprobs, Unset):
            logprobs = self.logprobs.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "index": index,
            }
        )
        if logprobs is not UNSET:
            field_dict["logprobs"] = logprobs

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.choice_logprobs import ChoiceLogprobs

        d = dict(src_dict)
        index = d.pop("index")

        _logprobs = d.pop("logprobs", UNSET)
        logprobs: ChoiceLogprobs | Unset
        if isinstance(_logprobs, Unset):
            logprobs = UNSET
        else:
            logprobs = ChoiceLogprobs.from_dict(_logprobs)

        choice = cls(
            index=index,
            logprobs=logprobs,
        )

        choice.additional_properties = d
        return choice

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
