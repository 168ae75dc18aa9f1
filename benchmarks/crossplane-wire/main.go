// crossplane-wire re-serializes RunFunctionRequests the way Crossplane sends them.
//
// Crossplane's function runner marshals every request with grpc-go's default codec
// (proto.Marshal, not Deterministic): every protobuf map -- every field of every Struct --
// is written in Go's random map-iteration order, so the same content goes out as different
// bytes on every call. It sets meta.tag to the hex SHA-256 of the request's deterministic
// marshal, computed before meta is set (crossplane internal/xfn, Tag).
//
// Input (stdin): frames of a uint32 big-endian length and a serialized RunFunctionRequest
// (any field order). Output (stdout): for each input frame, -copies frames, each a fresh
// proto.Marshal of that request with meta.tag set as Crossplane sets it. The message types
// come from a FileDescriptorSet (-descriptors, written by the benchmark from the SDK's
// run_function.proto), so no generated code is needed: dynamicpb messages marshal through
// the same reflective paths and range their maps in Go map order.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

func main() {
	descriptors := flag.String("descriptors", "", "FileDescriptorSet holding apiextensions.fn.proto.v1")
	copies := flag.Int("copies", 1, "serializations written per request")
	message := flag.String("message", "apiextensions.fn.proto.v1.RunFunctionRequest", "request type")
	flag.Parse()
	if err := run(*descriptors, *message, *copies); err != nil {
		fmt.Fprintln(os.Stderr, "crossplane-wire:", err)
		os.Exit(1)
	}
}

func run(descriptors, message string, copies int) error {
	raw, err := os.ReadFile(descriptors)
	if err != nil {
		return err
	}
	set := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(raw, set); err != nil {
		return err
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		return err
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(message))
	if err != nil {
		return err
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return fmt.Errorf("%s is not a message", message)
	}
	meta := md.Fields().ByName("meta")
	tag := meta.Message().Fields().ByName("tag")
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer out.Flush()
	var n [4]byte
	for {
		if _, err := io.ReadFull(in, n[:]); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		buf := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(in, buf); err != nil {
			return err
		}
		req := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(buf, req); err != nil {
			return err
		}
		// Tag: computed before meta is set, over the deterministic marshal.
		req.Clear(meta)
		det, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(det)
		m := req.Mutable(meta).Message()
		m.Set(tag, protoreflect.ValueOfString(hex.EncodeToString(sum[:])))
		for i := 0; i < copies; i++ {
			b, err := proto.Marshal(req) // grpc-go's codec: not deterministic
			if err != nil {
				return err
			}
			binary.BigEndian.PutUint32(n[:], uint32(len(b)))
			if _, err := out.Write(n[:]); err != nil {
				return err
			}
			if _, err := out.Write(b); err != nil {
				return err
			}
		}
	}
}
