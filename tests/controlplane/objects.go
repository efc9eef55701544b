package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

const (
	testNamespace = "kubelease-test"
	saName        = "kubelease"
	roleName      = "kubelease-leases"
	tokenTTL      = 24 * time.Hour
)

type obj = map[string]any

// setupObjects creates the namespace, ServiceAccount, Role and RoleBinding,
// requests a token for the ServiceAccount and waits until that token is
// authorised on leases (RBAC reaches the authorizer through an informer, so
// there is a short window in which it is not yet).
func (c *cluster) setupObjects(ctx context.Context) (token string, err error) {
	ns := "/api/v1/namespaces/" + testNamespace
	steps := []struct {
		path string
		body obj
	}{
		{"/api/v1/namespaces", obj{"apiVersion": "v1", "kind": "Namespace",
			"metadata": obj{"name": testNamespace}}},
		{ns + "/serviceaccounts", obj{"apiVersion": "v1", "kind": "ServiceAccount",
			"metadata": obj{"name": saName}}},
		{"/apis/rbac.authorization.k8s.io/v1/namespaces/" + testNamespace + "/roles", obj{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
			"metadata": obj{"name": roleName},
			"rules": []obj{{
				"apiGroups": []string{"coordination.k8s.io"},
				"resources": []string{"leases"},
				"verbs":     []string{"get", "list", "watch", "create", "update", "patch", "delete"},
			}},
		}},
		{"/apis/rbac.authorization.k8s.io/v1/namespaces/" + testNamespace + "/rolebindings", obj{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
			"metadata": obj{"name": roleName},
			"roleRef":  obj{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": roleName},
			"subjects": []obj{{"kind": "ServiceAccount", "name": saName, "namespace": testNamespace}},
		}},
	}
	deadline := time.Now().Add(c.timeout)
	for _, s := range steps {
		if _, err := c.post(ctx, deadline, s.path, s.body, true); err != nil {
			return "", err
		}
	}
	resp, err := c.post(ctx, deadline, ns+"/serviceaccounts/"+saName+"/token", obj{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"spec": obj{"expirationSeconds": int64(tokenTTL / time.Second)},
	}, false)
	if err != nil {
		return "", err
	}
	var tr struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal(resp, &tr); err != nil || tr.Status.Token == "" {
		return "", fmt.Errorf("TokenRequest for %s/%s returned no token: %.200s", testNamespace, saName, resp)
	}
	if err := c.waitAuthorized(ctx, tr.Status.Token); err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// waitAuthorized waits until token may list leases in the test namespace.
func (c *cluster) waitAuthorized(ctx context.Context, token string) error {
	hc, err := c.client(false, token)
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	url := c.apiURL() + "/apis/coordination.k8s.io/v1/namespaces/" + testNamespace + "/leases"
	deadline := time.Now().Add(c.timeout)
	last := ""
	for {
		resp, err := hc.Get(url)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the ServiceAccount token is still not authorised to list leases after %s (last answer: %s)", c.timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// post creates an object as admin, retrying transient failures (the
// namespace not yet visible to admission, 429, 5xx) until deadline.
// With existsOK, 409 AlreadyExists counts as success.
func (c *cluster) post(ctx context.Context, deadline time.Time, path string, body obj, existsOK bool) ([]byte, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.apiURL()+path, bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		var status int
		var out []byte
		resp, err := c.admin.Do(req)
		if err == nil {
			out, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			status = resp.StatusCode
			switch {
			case status == http.StatusCreated || status == http.StatusOK:
				return out, nil
			case status == http.StatusConflict && existsOK:
				return out, nil
			case status != http.StatusNotFound && status != http.StatusTooManyRequests && status < 500:
				return nil, fmt.Errorf("POST %s: HTTP %d: %.300s", path, status, out)
			}
			err = fmt.Errorf("HTTP %d: %.300s", status, out)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("POST %s: %v", path, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
