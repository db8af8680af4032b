import gc, json, sys
gc.freeze()
from bench.workloads import reservation
print(json.dumps(reservation.algorithm(1000, int(sys.argv[1]))))
