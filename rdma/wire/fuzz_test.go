package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzDecodeRequest: decoding never panics, fails only with ErrMalformed, and
// a frame that decodes re-encodes to exactly the same bytes (the encoding is
// canonical, so decode → encode → decode is the identity). ReadFrame over the
// same bytes never panics and agrees with DecodeRequest.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Request
		err := DecodeRequest(data, &r)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
		} else {
			enc, err := AppendRequest(nil, &r)
			if err != nil {
				t.Fatalf("decoded request does not encode: %v", err)
			}
			if !bytes.Equal(enc, data) {
				t.Fatalf("re-encoding differs:\n in %x\nout %x", data, enc)
			}
		}
		checkReadFrame(t, data, func(frame []byte) error {
			var r Request
			return DecodeRequest(frame, &r)
		})
	})
}

// FuzzDecodeResponse is FuzzDecodeRequest for responses.
func FuzzDecodeResponse(f *testing.F) {
	for _, s := range seedResponses() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Response
		err := DecodeResponse(data, &r)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
		} else {
			enc, err := AppendResponse(nil, &r)
			if err != nil {
				t.Fatalf("decoded response does not encode: %v", err)
			}
			if !bytes.Equal(enc, data) {
				t.Fatalf("re-encoding differs:\n in %x\nout %x", data, enc)
			}
		}
		checkReadFrame(t, data, func(frame []byte) error {
			var r Response
			return DecodeResponse(frame, &r)
		})
	})
}

// checkReadFrame reads frames from data until the stream ends or breaks and
// checks that every frame is whole and that a single-frame input decodes the
// same way through ReadFrame as directly.
func checkReadFrame(t *testing.T, data []byte, decode func([]byte) error) {
	rd := bytes.NewReader(data)
	var buf []byte
	for {
		frame, err := ReadFrame(rd, buf, 0)
		if err != nil {
			if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, ErrMalformed) {
				t.Fatalf("ReadFrame: unexpected error %v", err)
			}
			return
		}
		if int(le.Uint32(frame))+LengthSize != len(frame) {
			t.Fatalf("ReadFrame returned a frame of %d bytes announcing %d", len(frame), le.Uint32(frame))
		}
		if len(frame) == len(data) && (decode(frame) == nil) != (decode(data) == nil) {
			t.Fatalf("ReadFrame and direct decoding disagree")
		}
		_ = decode(frame)
		buf = frame
	}
}
