from engram.cli import main

main(prog_name="engram")
