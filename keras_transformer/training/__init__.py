"""Training: the trainer (`trainer.train`), distribution (strategies and
worker roles), optimisation (the paper's schedule and Adam), losses,
metrics, callbacks (`bleu_validation`, `throughput`, `checkpoints`), the
model choice at the end, fine-tuning, and the end-to-end `recipe` that
scripts/train.py runs. Nothing below this layer imports it.
"""
