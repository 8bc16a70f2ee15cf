from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.chat_completion_token_logprob import ChatCompletionTokenLogprob


T = TypeVar("T", bound="ChoiceLogprobs")


@_attrs_define
class ChoiceLogprobs:
    """
    Attributes:
        content (list[ChatCompletionTokenLogprob] | Unset):
    """

    content: list[ChatCompletionTokenLogprob] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        content: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.content, Unset):
            content = []
            for content_item_data in self.content:
                content_item = content_item_data.to_dict()
                content.append(content_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if content is not UNSET:
            field_dict["content"] = content

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.chat_completion_token_logprob import ChatCompletionTokenLogprob

        d = dict(src_dict)
        _content = d.pop("content", UNSET)
        content: list[ChatCompletionTokenLogprob] | Unset = UNSET
        if _content is not UNSET:
            content = []
            for content_item_data in _content:
                content_item = ChatCompletionTokenLogprob.from_dict(content_item_data)

                content.append(content_item)

        choice_logprobs = cls(
            content=content,
        )

        choice_logprobs.additional_properties = d
        return choice_logprobs

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
