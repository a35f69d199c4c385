package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// DefaultMaxInput bounds an input file: far above a 100,000-node snapshot
// (~0.5 GB), far below what would exhaust a workstation.
const DefaultMaxInput = 2 << 30

// ErrInput is wrapped by ReadFile's refusals (not a regular file, too large).
var ErrInput = errors.New("refused")

// ReadFile reads a regular file of at most limit bytes. A FIFO, device,
// socket or directory is refused before it is read (a FIFO would block, a
// device such as /dev/zero would never end), and so is a larger file.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := openInput(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: it is %s, not a regular file; save the input to a file first", ErrInput, fileKind(info.Mode()))
	}
	if info.Size() > limit {
		return nil, fmt.Errorf("%w: it holds %d bytes, above the limit of %d (raise it with --max-input-bytes)", ErrInput, info.Size(), limit)
	}
	// One buffer of the file's size: no growth, no second copy.
	buf := bytes.NewBuffer(make([]byte, 0, info.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > limit {
		return nil, fmt.Errorf("%w: it grew past the limit of %d bytes while being read (raise it with --max-input-bytes)", ErrInput, limit)
	}
	return buf.Bytes(), nil
}

// openInput opens without blocking: opening a FIFO for reading would wait
// for a writer before the caller could see what it is.
func openInput(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "not a regular file (" + m.Type().String() + ")"
}
