package ring_test

import (
	"fmt"

	"github.com/meridian-mesh/meridian/ring"
)

func ExampleBuild() {
	r := ring.Build([]ring.Member{
		{Name: "destination-1", Addr: "10.0.0.2:8086"},
		{Name: "destination-0", Addr: "10.0.0.1:8086"},
		{Name: "destination-2", Addr: "10.0.0.3:8086"},
	}, ring.DefaultHashConfig())

	owner := r.Owner("emojivoto/web-svc")
	fmt.Println(owner.Name, owner.Addr)
	fmt.Println(r.Owns("emojivoto/web-svc", owner.Name))
	for _, m := range r.Status().Members {
		fmt.Printf("%s owns %d of %d partitions\n", m.Name, m.Partitions, r.Partitions())
	}
	// Output:
	// destination-0 10.0.0.1:8086
	// true
	// destination-0 owns 1393 of 4096 partitions
	// destination-1 owns 1328 of 4096 partitions
	// destination-2 owns 1375 of 4096 partitions
}
