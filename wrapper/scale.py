"""Scale GP's ``POST /v4/models/{model_deployment_id}/completions``."""
