"""The transformer CRM (the paper's recipe): backbones, prompts, training, inference, its factored
reading, model cards."""
