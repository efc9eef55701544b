// Command clientgo measures client-go's leader election (the behaviour the
// Go wrapper kubelease replaces) against a real apiserver, for comparison with
// kubelease's own figures: failover after a crashed leader, handoff after a
// release, and the apiserver requests that standbys send.
//
// Usage: clientgo -kubeconfig SA.kubeconfig -admin-kubeconfig ADMIN.kubeconfig \
//
//	-namespace NS [-lease 15s -renew 10s -retry 2s -rounds 3 -standbys 20 -window 60s]
//
// With -leaders N it measures nothing itself and runs N elections instead, one
// candidate each, on the Leases PREFIX-0 .. PREFIX-(N-1), for bench/scale-kube.sh,
// which samples the apiserver meanwhile: it prints elect_all_ms=, then
// phase=steady, keeps leading for -hold, prints leaders_valid=V/N (the leaders
// that never stopped leading) and exits.
//
//	clientgo -kubeconfig SA.kubeconfig -namespace NS -leaders N [-prefix P] [-hold 90s]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

var (
	kubeconfig = flag.String("kubeconfig", "", "kubeconfig of the identity that runs the elections")
	adminCfg   = flag.String("admin-kubeconfig", "", "kubeconfig allowed to read the apiserver's /metrics")
	namespace  = flag.String("namespace", "default", "namespace of the Leases")
	leaseDur   = flag.Duration("lease", 15*time.Second, "lease duration")
	renew      = flag.Duration("renew", 10*time.Second, "renew deadline")
	retry      = flag.Duration("retry", 2*time.Second, "retry period")
	rounds     = flag.Int("rounds", 3, "measurements of each kind")
	standbys   = flag.Int("standbys", 20, "standbys for the request count (0: skip)")
	window     = flag.Duration("window", 60*time.Second, "how long to count requests")
	leaders    = flag.Int("leaders", 0, "run this many elections and hold them (0: the comparison)")
	prefix     = flag.String("prefix", "cg-scale", "with -leaders: the Leases' name prefix")
	hold       = flag.Duration("hold", 90*time.Second, "with -leaders: how long to keep leading")
)

type candidate struct {
	cancel  context.CancelFunc
	elected chan time.Time
	done    chan struct{}
}

func run(cs kubernetes.Interface, lease, id string, release bool) *candidate {
	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{cancel: cancel, elected: make(chan time.Time, 1), done: make(chan struct{})}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: lease, Namespace: *namespace},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: *leaseDur, RenewDeadline: *renew, RetryPeriod: *retry,
		ReleaseOnCancel: release,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { c.elected <- time.Now(); <-ctx.Done() },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "leader elector:", err)
		os.Exit(1)
	}
	go func() { le.Run(ctx); close(c.done) }()
	return c
}

func waitElected(c *candidate, limit time.Duration) time.Time {
	select {
	case t := <-c.elected:
		return t
	case <-time.After(limit):
		fmt.Fprintln(os.Stderr, "timed out waiting for a leader")
		os.Exit(1)
	}
	return time.Time{}
}

// takeover: A leads, B stands by; A stops (released or not); the time until B leads.
func takeover(cs kubernetes.Interface, lease string, release bool) time.Duration {
	a := run(cs, lease, "a", release)
	waitElected(a, 60*time.Second)
	b := run(cs, lease, "b", true)
	time.Sleep(*retry) // let B observe the record before A goes away
	t0 := time.Now()
	a.cancel() // without release, A simply stops renewing, as a crashed process would
	t1 := waitElected(b, *leaseDur+*retry+30*time.Second)
	<-a.done
	b.cancel()
	<-b.done
	return t1.Sub(t0)
}

func stats(name string, d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	fmt.Printf("client-go %-28s median %6d ms  max %6d ms  (n=%d)\n", name,
		d[len(d)/2].Milliseconds(), d[len(d)-1].Milliseconds(), len(d))
}

func leaseRequests(admin *rest.Config) float64 {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "admin client:", err)
		os.Exit(1)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "GET /metrics:", err)
		os.Exit(1)
	}
	total := 0.0
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") ||
			!strings.Contains(line, `resource="leases"`) ||
			!strings.Contains(line, `group="coordination.k8s.io"`) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64); err == nil {
			total += v
		}
	}
	return total
}

// holdLeaders runs n elections, one candidate each, and keeps leading for
// -hold after the last was elected.
func holdLeaders(cs kubernetes.Interface, n int) {
	var mu sync.Mutex
	stopped := 0
	t0 := time.Now()
	var all []*candidate
	for i := 0; i < n; i++ {
		c := run(cs, fmt.Sprintf("%s-%d", *prefix, i), fmt.Sprintf("%s-leader-%d", *prefix, i), true)
		all = append(all, c)
		go func() {
			<-c.done // le.Run returns when leadership is lost (or cancelled, below)
			mu.Lock()
			stopped++
			mu.Unlock()
		}()
	}
	for _, c := range all {
		waitElected(c, 120*time.Second)
	}
	fmt.Printf("elect_all_ms=%.1f\n", float64(time.Since(t0).Microseconds())/1000)
	fmt.Println("phase=steady")
	time.Sleep(*hold)
	mu.Lock()
	fmt.Printf("leaders_valid=%d/%d\n", n-stopped, n)
	mu.Unlock()
	for _, c := range all {
		c.cancel()
	}
	for _, c := range all {
		<-c.done
	}
	fmt.Println("phase=done")
}

func main() {
	klog.InitFlags(nil)
	flag.Set("v", "0")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	cs := kubernetes.NewForConfigOrDie(cfg)
	if *leaders > 0 {
		holdLeaders(cs, *leaders)
		return
	}
	id := time.Now().UnixNano() % 1000000
	fmt.Printf("client-go leader election, %v/%v/%v\n", *leaseDur, *renew, *retry)

	var crash, handoff []time.Duration
	for i := 0; i < *rounds; i++ {
		handoff = append(handoff, takeover(cs, fmt.Sprintf("cg-handoff-%d-%d", id, i), true))
		crash = append(crash, takeover(cs, fmt.Sprintf("cg-crash-%d-%d", id, i), false))
	}
	stats("failover after a crash", crash)
	stats("handoff after a release", handoff)

	if *standbys > 0 && *adminCfg != "" {
		admin, err := clientcmd.BuildConfigFromFlags("", *adminCfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "admin kubeconfig:", err)
			os.Exit(1)
		}
		lease := fmt.Sprintf("cg-standbys-%d", id)
		leader := run(cs, lease, "leader", true)
		waitElected(leader, 60*time.Second)
		before := leaseRequests(admin)
		time.Sleep(*window)
		alone := leaseRequests(admin) - before
		var others []*candidate
		for i := 0; i < *standbys; i++ {
			others = append(others, run(cs, lease, fmt.Sprintf("standby-%d", i), true))
		}
		time.Sleep(*retry)
		before = leaseRequests(admin)
		time.Sleep(*window)
		with := leaseRequests(admin) - before
		fmt.Printf("client-go apiserver lease requests in %v: leader alone %.0f, leader + %d standbys %.0f\n",
			*window, alone, *standbys, with)
		for _, o := range others {
			o.cancel()
		}
		leader.cancel()
	}
}
