#!/bin/bash
# put_bw and get_bw, one operation per flush, 2 unshaped NICs (CPU-bound), by btl_ofi_stripe_min
cd /work/main
contrib/hosts down >/dev/null 2>&1
contrib/hosts up 2 --nics 2 --unshaped >/dev/null
for r in 1 2 3; do
  for sm in 0 16384 65536 262144; do
    echo "== round $r stripe_min $sm"
    timeout 200 contrib/mpirun --hosts 2 --nics 2 -np 2 --mca pml ob1 --mca btl ofi,self --mca osc rdma --mca btl_ofi_provider_include "tcp;ofi_rxm" --mca btl_ofi_max_nics 2 --mca btl_ofi_stripe_min $sm build/osc_bench -t put_bw,get_bw -m 16384,32768,65536,131072,262144,1048576 -W 1 -i 300 -w 10 2>&1 | grep -E "^[0-9]|^# osc_bench"
  done
done
contrib/hosts down >/dev/null
