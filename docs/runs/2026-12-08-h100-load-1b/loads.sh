#!/usr/bin/env bash
# The 1B load with the new and the old binary on the same shards, then the GPU tests
# while time is left. Key lines in $OUT/loads.txt as they come; raw logs in $OUT/raw.tgz.
o=${OUT:-/tmp/out}; T=/tmp/k2l; R=/tmp/raw; mkdir -p $T $o $R
start=$SECONDS; limit=${LIMIT:-570}
B=.carry/gpu/bin
for f in $B/*.xz .carry/load/*.xz; do [ -e "$f" ] && xz -d -f "$f"; done
chmod +x $B/* .carry/load/k2rpq-old
pack() { tar czf $o/raw.tgz -C $R .; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; free -g | head -2; df -h /tmp | tail -1; $B/k2rpq --version; } > $o/machine.txt 2>&1
if [ ! -f $T/shards.done ]; then
  rm -rf $T/shards
  echo "=== $(date +%T) gen" | tee -a $o/loads.txt
  /usr/bin/time -v -o $R/gen-time.txt $B/k2rpq-bench gen wikidata-like --triples 1000000000 -o $T/shards --shards 64 > $R/gen.txt 2>&1 && touch $T/shards.done
  tail -2 $R/gen.txt | tee -a $o/loads.txt
fi
du -sb $T/shards | tee -a $o/loads.txt
for v in ${ORDER:-new old}; do
  bin=$B/k2rpq; [ $v = old ] && bin=.carry/load/k2rpq-old
  rm -rf $T/s; sync
  echo "=== $(date +%T) load $v" | tee -a $o/loads.txt
  lines=--no-line-lists; [ $v = new ] && lines=
  /usr/bin/time -v -o $R/load-$v-time.txt $bin load $T/shards --store $T/s $lines > $R/load-$v.txt 2>&1
  echo "rc $?" | tee -a $o/loads.txt
  tail -5 $R/load-$v.txt | tee -a $o/loads.txt
  grep -E "Elapsed|Maximum resident|User time|System time|Percent of CPU" $R/load-$v-time.txt | tee -a $o/loads.txt
  pack
done
rm -rf $T/s
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" K2RPQ_SHARED=$PWD/.carry/gpu
for t in gpu_limits rpq_gpu gpu_cache gpu_cache_engine sparql_gpu gpu_multi gpu_baselines gpu_engine; do
  left=$(( limit - (SECONDS - start) ))
  if [ $left -lt 20 ]; then echo "test $t: not run, no time left" | tee -a $o/loads.txt; continue; fi
  echo "=== $(date +%T) test $t" >> $o/loads.txt
  if timeout $left $B/$t --test-threads=1 > $R/test-$t.log 2>&1; then
    echo "test $t ok: $(grep -E '^test result' $R/test-$t.log | tail -1)" | tee -a $o/loads.txt
  else
    echo "test $t FAILED or cut (rc $?)" | tee -a $o/loads.txt; tail -30 $R/test-$t.log
  fi
  pack
done
