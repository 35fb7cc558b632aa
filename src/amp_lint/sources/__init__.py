"""The files a run reads and writes: discovery, .gitignore, notebooks, writing fixes back."""
