"""The transformer CRM (the paper's recipe): backbones, prompts, training, inference, model cards."""
