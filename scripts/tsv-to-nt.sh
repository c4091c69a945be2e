#!/usr/bin/env bash
# Turns "src<TAB>dst" edge lines (stdin) into N-Triples over one predicate, with the node
# and predicate IRIs that `k2rpq rpq --tsv` uses (urn:k2rpq:n:ID, urn:k2rpq:p).
exec awk '!/^#/ && NF >= 2 { printf "<urn:k2rpq:n:%s> <urn:k2rpq:p> <urn:k2rpq:n:%s> .\n", $1, $2 }'
