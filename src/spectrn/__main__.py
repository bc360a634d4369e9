from spectrn.cli.main import main

main()
