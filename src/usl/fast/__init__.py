"""The fast CRM, the default judge: what it reads of criteria (encoder, lexicon, readers, kinds) and of
answers (static vectors, style features, register and style scorers), the model that weighs them per
criterion, and its training (its gate to the quality reader: ``usl.quality``)."""
