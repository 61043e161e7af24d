"""Help for scripts written for Horovod, one module per concept:

    horovod_alias   installs (and removes) the opt-in `horovod` package that
                    is ringcc under Horovod's name, never over a real Horovod
    horovod_names   what that package binds: horovod.run, __version__, and
                    horovod.torch, .tensorflow, .keras, .mxnet, .ray as
                    ringcc's modules, imported when first used

`python -m ringcc.compat install-horovod-alias` (see __main__.py and
docs/migrating.md). ringcc.run itself is ringcc/func_run.py.
"""
