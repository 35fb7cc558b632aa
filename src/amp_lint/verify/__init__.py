"""Runtime verification: run each rule's bad and fixed examples under ``torch.autocast``.

Everything in this package needs torch and nothing else (not even libcst), so that the suite
runs on a GPU machine that has only torch and pytest: ``python -m amp_lint.verify``. torch is
imported only when a run starts; ``amp-lint verify`` is the same command.
"""
