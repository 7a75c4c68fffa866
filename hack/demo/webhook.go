package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// deleteAndWatchCleanup deletes a node and shows its finalizers until it is
// gone, then the webhook's log lines about it (kubectl logs, as in a cluster).
func deleteAndWatchCleanup(ctx context.Context, c *harness.Cluster, name string) error {
	if err := c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			fmt.Printf("%s  %s is gone\n", time.Now().Format("15:04:05"), name)
			return true, nil
		}
		if err != nil {
			return false, err
		}
		s := fmt.Sprintf("%s: deletionTimestamp=%v finalizers=%v", name, n.DeletionTimestamp != nil, n.Finalizers)
		if s != last {
			fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), s)
			last = s
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	// A replica that ran on the switched-off node has no logs to give any
	// more (kubectl -l would fail on it): ask the others.
	pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=kube-node-ready-webhook"})
	if err != nil {
		return err
	}
	fmt.Printf("kubectl logs -n %s -l app=kube-node-ready-webhook, lines about it:\n", namespace)
	for _, p := range pods.Items {
		if p.Spec.NodeName == name {
			continue
		}
		logs, err := c.Kubectl(ctx, nil, "logs", "-n", namespace, "pod/"+p.Name, "--tail=-1", "--prefix")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, `"`+name+`"`) {
				fmt.Println("  " + line)
			}
		}
	}
	return nil
}
