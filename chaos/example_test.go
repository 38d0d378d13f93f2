package chaos_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/lockproof/lockproof/chaos"
)

// A proxy in front of a server: a request goes through, then the replies
// are dropped (chaos.KindPartition) and the request gets no answer.
func Example() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	go func() { // an echo server
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	p, err := chaos.StartProxy(ln.Addr().String(), 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	r := bufio.NewReader(c)
	fmt.Fprintln(c, "ping")
	line, _ := r.ReadString('\n')
	fmt.Print("reply: ", line)

	p.DropReplies()
	fmt.Println("fault:", chaos.KindPartition)
	fmt.Fprintln(c, "ping")
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err = r.ReadString('\n')
	fmt.Println("no reply:", errors.Is(err, os.ErrDeadlineExceeded))
	// Output:
	// reply: ping
	// fault: partition
	// no reply: true
}
