from rmq.admin import main

main()
