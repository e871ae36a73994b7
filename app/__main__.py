from app.serving.cli import main

main()
