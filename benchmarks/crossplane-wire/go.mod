module sack8s.bench/crossplane-wire

go 1.23

require google.golang.org/protobuf v1.36.6
