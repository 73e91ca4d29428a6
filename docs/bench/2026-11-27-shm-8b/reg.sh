#!/bin/bash
cd /work/main
one() { # BUILD label
  ( export BTL_OFI_BUILD=$1; eval "$(contrib/env)"; contrib/mpirun -np 2 --mca pml ob1 --mca btl ofi,self --mca osc rdma --mca btl_ofi_provider_include ${PROV:-shm} /work/main/build/osc_bench -t put_lat,get_lat,fop_lat,put_rate -m 8 2>&1 ) |
   awk -v l=$2 '/osc_bench [a-z_]*:/{t=$3; sub(":","",t)} /^8 /{v[t]=$2} /pvars/{p=$0} END {printf "%-5s put %6.2f get %6.2f fop %6.2f rate %9.0f\n", l, v["put_lat"], v["get_lat"], v["fop_lat"], v["put_rate"]}'
}
for r in $(seq 1 ${N:-6}); do one /work/main/build head; one /tmp/b1126 n1126; done
