from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.choice import Choice


T = TypeVar("T", bound="CompletionResponse")


@_attrs_define
class CompletionResponse:
    """
    Attributes:
        completions (list[list[list[str] | str]]):
        finish_reason (str | Unset):
        prompt_tokens (int | Unset):  Default: 0.
        response_tokens (int | Unset):  Default: 0.
        choices (list[Choice] | Unset):
    """

    completions: list[list[list[str] | str]]
    finish_reason: str | Unset = UNSET
    prompt_tokens: int | Unset = 0
    response_tokens: int | Unset = 0
    choices: list[Choice] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        completions = []
        for completions_item_data in self.completions:
            completions_item = []
            for completions_item_item_data in completions_item_data:
                completions_item_item: list[str] | str
                if isinstance(completions_item_item_data, list):
                    completions_item_item = completions_item_item_data

                else:
                    completions_item_item = completions_item_item_data
                completions_item.append(completions_item_item)

            completions.append(completions_item)

        finish_reason = self.finish_reason

        prompt_tokens = self.prompt_tokens

        response_tokens = self.response_tokens

        choices: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.choices, Unset):
            choices = []
            for choices_item_data in self.choices:
                choices_item = choices_item_data.to_dict()
                choices.append(choices_item)

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "completions": completions,
            }
        )
        if finish_reason is not UNSET:
            field_dict["finish_reason"] = finish_reason
        if prompt_tokens is not UNSET:
            field_dict["prompt_tokens"] = prompt_tokens
        if response_tokens is not UNSET:
            field_dict["response_tokens"] = response_tokens
        if choices is not UNSET:
            field_dict["choices"] = choices

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.choice import Choice

        d = dict(src_dict)
        completions = []
        _completions = d.pop("completions")
        for completions_item_data in _completions:
            completions_item = []
            _completions_item = completions_item_data
            for completions_item_item_data in _completions_item:

                def _parse_completions_item_item(data: object) -> list[str] | str:
                    try:
                        if not isinstance(data, list):
                            raise TypeError()
                        completions_item_item_type_1 = cast(list[str], data)

                        return completions_item_item_type_1
                    except (TypeError, ValueError, AttributeError, KeyError):
                        pass
                    return cast(list[str] | str, data)

                completions_item_item = _parse_completions_item_item(
                    completions_item_item_data
                )

                completions_item.append(completions_item_item)

            completions.append(completions_item)

        finish_reason = d.pop("finish_reason", UNSET)

        prompt_tokens = d.pop("prompt_tokens", UNSET)

        response_tokens = d.pop("response_tokens", UNSET)

        _choices = d.pop("choices", UNSET)
        choices: list[Choice] | Unset = UNSET
        if _choices is not UNSET:
            choices = []
            for choices_item_data in _choices:
                choices_item = Choice.from_dict(choices_item_data)

                choices.append(choices_item)

        completion_response = cls(
            completions=completions,
            finish_reason=finish_reason,
            prompt_tokens=prompt_tokens,
            response_tokens=response_tokens,
            choices=choices,
        )

        return completion_response
