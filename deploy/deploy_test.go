// Package deploy holds the deployment files: Kubernetes manifests and a
// systemd unit. Its tests decode each file as its consumer would, strictly,
// so a misspelt field fails here rather than in a cluster.
package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/unit"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// decodeStrict turns one YAML document into JSON (duplicate keys are an
// error) and decodes it into v, refusing unknown fields.
func decodeStrict(doc []byte, v any) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the object")
	}
	return nil
}

// object returns an empty value of the API type of apiVersion and kind.
func object(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "v1 PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, nil
	}
	return nil, fmt.Errorf("unexpected apiVersion %q kind %q", apiVersion, kind)
}

// manifests decodes every document of deploy/kubernetes/*.yaml, keyed by
// file name (and document index after the first).
func manifests(t *testing.T) map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in kubernetes/ (%v)", err)
	}
	out := map[string]any{}
	sep := regexp.MustCompile(`(?m)^---\s*$`)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range sep.Split(string(raw), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var tm struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			obj, err := object(tm.APIVersion, tm.Kind)
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			if err := decodeStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s document %d (%s): %v", f, i, tm.Kind, err)
			}
			key := filepath.Base(f)
			if i > 0 {
				key = fmt.Sprintf("%s#%d", key, i)
			}
			out[key] = obj
		}
	}
	return out
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// TestStrictDecode checks that decodeStrict catches what a typo makes.
func TestStrictDecode(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":  "apiVersion: v1\nkind: Service\nspec:\n  selectr: {a: b}\n",
		"duplicate key":  "apiVersion: v1\nkind: Service\nspec:\n  type: ClusterIP\n  type: NodePort\n",
		"wrong type":     "apiVersion: v1\nkind: Service\nspec:\n  ports: 8080\n",
		"nested unknown": "apiVersion: v1\nkind: Service\nspec:\n  ports:\n    - prot: 80\n",
	} {
		if err := decodeStrict([]byte(doc), &corev1.Service{}); err == nil {
			t.Errorf("%s: decodeStrict accepted\n%s", name, doc)
		}
	}
	if err := decodeStrict([]byte("apiVersion: v1\nkind: Service\nspec:\n  ports:\n    - port: 80\n"), &corev1.Service{}); err != nil {
		t.Errorf("a valid Service: %v", err)
	}
}

// TestManifests decodes every manifest strictly into the Kubernetes API
// types and checks that they fit together: the Service, the budget and the
// autoscaler select the Deployment's pods, the probes use /health (503
// while loading), and each GPU patch requests its vendor's resource.
func TestManifests(t *testing.T) {
	m := manifests(t)
	dep, ok := m["deployment.yaml"].(*appsv1.Deployment)
	if !ok {
		t.Fatalf("deployment.yaml is %T, want a Deployment", m["deployment.yaml"])
	}
	pod := dep.Spec.Template
	if !selects(dep.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("the Deployment's selector %v does not select its pods %v", dep.Spec.Selector.MatchLabels, pod.Labels)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/health" || p.HTTPGet.Port.String() != "http" {
			t.Errorf("the %s probe = %+v, want GET /health on the http port", name, p)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("container ports %+v, want http 8080", c.Ports)
	}
	if !contains(c.Args, "--port=8080") || !contains(c.Args, "--host=0.0.0.0") || c.Args[0] != "serve" {
		t.Errorf("container args %q, want serve listening on 0.0.0.0:8080", c.Args)
	}

	svc := m["service.yaml"].(*corev1.Service)
	if !selects(svc.Spec.Selector, pod.Labels) {
		t.Errorf("the Service selects %v, not the pods %v", svc.Spec.Selector, pod.Labels)
	}
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("the Service: affinity %q, target port %v; want ClientIP and http", svc.Spec.SessionAffinity, svc.Spec.Ports[0].TargetPort)
	}
	pdb := m["pdb.yaml"].(*policyv1.PodDisruptionBudget)
	if !selects(pdb.Spec.Selector.MatchLabels, pod.Labels) || pdb.Spec.MinAvailable == nil {
		t.Errorf("the PodDisruptionBudget selects %v (min available %v), not the pods", pdb.Spec.Selector.MatchLabels, pdb.Spec.MinAvailable)
	}
	hpa := m["hpa.yaml"].(*autoscalingv2.HorizontalPodAutoscaler)
	if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != dep.Name || ref.APIVersion != "apps/v1" {
		t.Errorf("the autoscaler scales %+v, want the Deployment %s", ref, dep.Name)
	}
	if ms := hpa.Spec.Metrics; len(ms) != 1 || ms[0].Pods == nil || ms[0].Pods.Metric.Name != "vkllm_queue_depth" {
		t.Errorf("the autoscaler's metrics %+v, want the pods metric vkllm_queue_depth (the server's queue gauge)", ms)
	}
	if *hpa.Spec.MinReplicas < 1 || hpa.Spec.MaxReplicas < *hpa.Spec.MinReplicas {
		t.Errorf("the autoscaler's range %d..%d", *hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
	}
	claim := m["pvc.yaml"].(*corev1.PersistentVolumeClaim)
	if v := pod.Spec.Volumes[0]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claim.Name {
		t.Errorf("the models volume %+v does not use the claim %s", v, claim.Name)
	}

	for file, resource := range map[string]corev1.ResourceName{
		"gpu-amd.yaml": "amd.com/gpu", "gpu-intel.yaml": "gpu.intel.com/i915", "gpu-nvidia.yaml": "nvidia.com/gpu",
	} {
		p, ok := m[file].(*appsv1.Deployment)
		if !ok || p.Name != dep.Name || len(p.Spec.Template.Spec.Containers) != 1 {
			t.Errorf("%s is not a patch of the Deployment %s", file, dep.Name)
			continue
		}
		pc := p.Spec.Template.Spec.Containers[0]
		if pc.Name != c.Name {
			t.Errorf("%s patches the container %q, want %q", file, pc.Name, c.Name)
		}
		if q, ok := pc.Resources.Limits[resource]; !ok || q.Value() != 1 {
			t.Errorf("%s limits %v, want one %s", file, pc.Resources.Limits, resource)
		}
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestSystemdUnit parses the unit and checks its sandboxing, and has
// systemd-analyze verify it where systemd is installed (any warning fails).
func TestSystemdUnit(t *testing.T) {
	path := filepath.Join("systemd", "vkllm.service")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opts, err := unit.DeserializeOptions(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	got := map[string][]string{}
	for _, o := range opts {
		got[o.Section+"."+o.Name] = append(got[o.Section+"."+o.Name], o.Value)
	}
	for key, want := range map[string]string{
		"Service.ExecStart": "/usr/local/bin/vkllm serve", "Service.DynamicUser": "yes", "Service.ProtectSystem": "strict",
		"Service.DevicePolicy": "closed", "Service.DeviceAllow": "char-drm rw", "Service.NoNewPrivileges": "yes",
		"Service.ProtectHome": "yes", "Service.PrivateTmp": "yes", "Service.StateDirectory": "vkllm",
		"Service.KillSignal": "SIGTERM", "Install.WantedBy": "multi-user.target",
	} {
		if !contains(got[key], want) {
			t.Errorf("%s: %s = %q, want %q", path, key, got[key], want)
		}
	}
	sd, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: the unit was only parsed")
		return
	}
	// verify wants ExecStart's binary to exist: point it at this test's.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	tmp := filepath.Join(t.TempDir(), "vkllm.service")
	if err := os.WriteFile(tmp, bytes.Replace(raw, []byte("ExecStart=/usr/local/bin/vkllm"), []byte("ExecStart="+self), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sd, "verify", tmp).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", path, err, out)
	}
}
