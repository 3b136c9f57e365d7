"""The fast CRM, the default judge: criteria read by a small encoder and a lexicon, answers by static
vectors, style features and a style scorer, weighed against each other per criterion; its training."""
