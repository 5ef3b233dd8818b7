package route_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/prefixgate/prefixgate/route"
)

func ExampleRouter_Pick() {
	r, err := route.New(route.Config{}, []route.Member{
		{Name: "vllm-0"},
		{Name: "vllm-1", Models: []string{"llama:lora-sql"}},
	})
	if err != nil {
		panic(err)
	}
	d, err := r.Pick(context.Background(), route.Request{Key: 0x5eed, Model: "llama:lora-sql"})
	switch {
	case errors.Is(err, route.ErrNoCandidates):
		fmt.Println("503")
	case errors.Is(err, route.ErrSaturated):
		fmt.Println("429")
	case err == nil:
		defer d.Done()
		fmt.Println(d.Backend == d.Home, d.Reason)
	}
	// Output: true affinity
}
