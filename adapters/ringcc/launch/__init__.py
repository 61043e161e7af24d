"""ringrun, the launcher of ringcc jobs, one module per concept, each
importing only those below it (docs/architecture.md, "The outer ring"):

    cli             the options, the help, which mode runs the job
    elastic_driver  elastic mode, with discovery, blacklist, memberships
                    and rpc_server
    mpirun          --mpi
    build_report    --check-build
    plan            where each rank runs, its environment and command
    agents          starting a rank through ssh or --agent
    processes       the runner, console, output, signals, exit status
    variables       the job's variables, -x, --env-all
    hosts           host lists, placement, --bind-to cores, free ports
    errors          LaunchError and ringrun's exit codes

`ringrun` and `python -m ringcc.launcher` run ringcc.launch.cli.main.
"""
