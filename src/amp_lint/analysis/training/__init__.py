"""How a module trains: half parameters, optimizers over them, FSDP mixed precision, frameworks'
precision settings.
"""
