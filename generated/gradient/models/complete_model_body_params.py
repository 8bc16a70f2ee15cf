from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.complete_model_body_params_guidance import (
        CompleteModelBodyParamsGuidance,
    )
    from ..models.complete_model_body_params_rag import CompleteModelBodyParamsRag


T = TypeVar("T", bound="CompleteModelBodyParams")


@_attrs_define
class CompleteModelBodyParams:
    """
    Attributes:
        query (str): The prompt string you are providing the model, to which the model will generate a completion in
            response.
        auto_template (bool | None | Unset): Automatically adds the recommended base model templating. Server default:
            true.
        guidance (CompleteModelBodyParamsGuidance | None | Unset):
        max_generated_token_count (int | None | Unset): The maximum number of tokens to generate.
        rag (CompleteModelBodyParamsRag | None | Unset):
        temperature (float | None | Unset): This parameter adjusts the degree of randomness in generation. Higher
            temperature results in more diverse generations.
        top_k (int | None | Unset): This parameter ensures that only the top k most likely tokens are considered for
            generation at each step.
        top_p (float | None | Unset): This parameter ensures that only the most likely tokens, with total probability
            mass of p, are considered for generation at each step. If topK is also enabled, topP acts after topK.
    """

    query: str
    auto_template: bool | None | Unset = UNSET
    guidance: CompleteModelBodyParamsGuidance | None | Unset = UNSET
    max_generated_token_count: int | None | Unset = UNSET
    rag: CompleteModelBodyParamsRag | None | Unset = UNSET
    temperature: float | None | Unset = UNSET
    top_k: int | None | Unset = UNSET
    top_p: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.complete_model_body_params_guidance import (
            CompleteModelBodyParamsGuidance,
        )
        from ..models.complete_model_body_params_rag import CompleteModelBodyParamsRag

        query = self.query

        auto_template: bool | None | Unset
        if isinstance(self.auto_template, Unset):
            auto_template = UNSET
        else:
            auto_template = self.auto_template

        guidance: dict[str, Any] | None | Unset
        if isinstance(self.guidance, Unset):
            guidance = UNSET
        elif isinstance(self.guidance, CompleteModelBodyParamsGuidance):
            guidance = self.guidance.to_dict()
        else:
            guidance = self.guidance

        max_generated_token_count: int | None | Unset
        if isinstance(self.max_generated_token_count, Unset):
            max_generated_token_count = UNSET
        else:
            max_generated_token_count = self.max_generated_token_count

        rag: dict[str, Any] | None | Unset
        if isinstance(self.rag, Unset):
            rag = UNSET
        elif isinstance(self.rag, CompleteModelBodyParamsRag):
            rag = self.rag.to_dict()
        else:
            rag = self.rag

        temperature: float | None | Unset
        if isinstance(self.temperature, Unset):
            temperature = UNSET
        else:
            temperature = self.temperature

        top_k: int | None | Unset
        if isinstance(self.top_k, Unset):
            top_k = UNSET
        else:
            top_k = self.top_k

        top_p: float | None | Unset
        if isinstance(self.top_p, Unset):
            top_p = UNSET
        else:
            top_p = self.top_p

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "query": query,
            }
        )
        if auto_template is not UNSET:
            field_dict["autoTemplate"] = auto_template
        if guidance is not UNSET:
            field_dict["guidance"] = guidance
        if max_generated_token_count is not UNSET:
            field_dict["maxGeneratedTokenCount"] = max_generated_token_count
        if rag is not UNSET:
            field_dict["rag"] = rag
        if temperature is not UNSET:
            field_dict["temperature"] = temperature
        if top_k is not UNSET:
            field_dict["topK"] = top_k
        if top_p is not UNSET:
            field_dict["topP"] = top_p

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.complete_model_body_params_guidance import (
            CompleteModelBodyParamsGuidance,
        )
        from ..models.complete_model_body_params_rag import CompleteModelBodyParamsRag

        d = dict(src_dict)
        query = d.pop("query")

        def _parse_auto_template(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        auto_template = _parse_auto_template(d.pop("autoTemplate", UNSET))

        def _parse_guidance(
            data: object,
        ) -> CompleteModelBodyParamsGuidance | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                guidance_type_1 = CompleteModelBodyParamsGuidance.from_dict(data)

                return guidance_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CompleteModelBodyParamsGuidance | None | Unset, data)

        guidance = _parse_guidance(d.pop("guidance", UNSET))

        def _parse_max_generated_token_count(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_generated_token_count = _parse_max_generated_token_count(
            d.pop("maxGeneratedTokenCount", UNSET)
        )

        def _parse_rag(data: object) -> CompleteModelBodyParamsRag | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                rag_type_1 = CompleteModelBodyParamsRag.from_dict(data)

                return rag_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CompleteModelBodyParamsRag | None | Unset, data)

        rag = _parse_rag(d.pop("rag", UNSET))

        def _parse_temperature(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        temperature = _parse_temperature(d.pop("temperature", UNSET))

        def _parse_top_k(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        top_k = _parse_top_k(d.pop("topK", UNSET))

        def _parse_top_p(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        top_p = _parse_top_p(d.pop("topP", UNSET))

        complete_model_body_params = cls(
            query=query,
            auto_template=auto_template,
            guidance=guidance,
            max_generated_token_count=max_generated_token_count,
            rag=rag,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
        )

        complete_model_body_params.additional_properties = d
        return complete_model_body_params

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
