"""Extractive question answering (SQuAD 1.1 and 2.0) on a pretrained encoder.

Modules: `data` (reading SQuAD JSON / tfds into examples, and sliding-window features whose
tokens map back to the context through character offsets), `heads` (the original ELECTRA's
answer heads: start/end, joint start-then-end, answerability), `postprocess` (n-best spans of
each question over its windows, null odds), `metrics` (the official SQuAD 1.1 and 2.0 EM / F1
and the 2.0 null threshold) and `task` (`SquadTask`: training and evaluation on the fine-tuning core).
"""
