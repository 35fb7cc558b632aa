REGISTRY = {}


def register(cls):
    REGISTRY[cls.__name__] = cls
    return cls


def build(cfg):
    return REGISTRY[cfg.pop("type")](**cfg)
