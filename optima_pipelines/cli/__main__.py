from optima_pipelines.cli import main

main()
