"""The transformer CRM (the paper's recipe): backbones, prompts, training, inference, its factored
reading, the stored readings of the quality reader, model cards."""
