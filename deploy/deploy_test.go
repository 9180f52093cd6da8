// Package deploy holds the deployment files: Kubernetes manifests and a
// systemd unit. Its tests decode each file as its consumer would, strictly,
// so a misspelt field fails here rather than in a cluster.
package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// applied lists the files `kubectl apply -f kubernetes/` reads: those of
// the folder itself (not its subfolders) ending in .json, .yaml or .yml.
func applied(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".json", ".yaml", ".yml":
			if !e.IsDir() {
				files = append(files, filepath.Join("kubernetes", e.Name()))
			}
		}
	}
	if len(files) == 0 {
		t.Fatal("no manifests in kubernetes/")
	}
	return files
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decodeObjects decodes every document of raw strictly into its API type
// (named by its apiVersion and kind); name says where, for errors.
func decodeObjects(name string, raw []byte) ([]any, error) {
	var out []any
	for i, doc := range docSep.Split(string(raw), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return nil, fmt.Errorf("%s document %d: %v", name, i, err)
		}
		obj, err := object(tm.APIVersion, tm.Kind)
		if err != nil {
			return nil, fmt.Errorf("%s document %d: %v", name, i, err)
		}
		if err := decodeStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("%s document %d (%s): %v", name, i, tm.Kind, err)
		}
		if err := whole(obj); err != nil {
			return nil, fmt.Errorf("%s document %d (%s): not a whole object (a patch?): %v", name, i, tm.Kind, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// whole reports what obj lacks to be created on its own, as the API server
// would refuse it: a patch decodes into the same type but lacks these.
func whole(obj any) error {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		if o.Name == "" || o.Spec.Selector == nil || len(o.Spec.Template.Spec.Containers) == 0 {
			return errors.New("a Deployment needs a name, a selector and containers")
		}
		for _, c := range o.Spec.Template.Spec.Containers {
			if c.Image == "" {
				return fmt.Errorf("container %q has no image", c.Name)
			}
		}
	case *corev1.Service:
		if o.Name == "" || len(o.Spec.Ports) == 0 {
			return errors.New("a Service needs a name and ports")
		}
	case *corev1.PersistentVolumeClaim:
		if _, ok := o.Spec.Resources.Requests[corev1.ResourceStorage]; o.Name == "" || !ok || len(o.Spec.AccessModes) == 0 {
			return errors.New("a claim needs a name, access modes and a storage request")
		}
	case *policyv1.PodDisruptionBudget:
		if o.Name == "" || o.Spec.Selector == nil {
			return errors.New("a PodDisruptionBudget needs a name and a selector")
		}
	case *autoscalingv2.HorizontalPodAutoscaler:
		if o.Name == "" || o.Spec.ScaleTargetRef.Name == "" || o.Spec.MaxReplicas < 1 {
			return errors.New("an autoscaler needs a name, a target and maxReplicas")
		}
	}
	return nil
}

// manifests decodes every document of the files `kubectl apply -f
// kubernetes/` reads, keyed by file name (and document index after the
// first); each must be a whole object.
func manifests(t *testing.T) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, f := range applied(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeObjects(f, raw)
		if err != nil {
			t.Fatal(err)
		}
		for i, obj := range objs {
			key := filepath.Base(f)
			if i > 0 {
				key = fmt.Sprintf("%s#%d", key, i)
			}
			out[key] = obj
		}
	}
	return out
}

// dockerEnv returns the ENV settings of the Dockerfile's last stage (the
// runtime image).
func dockerEnv(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	env := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.EqualFold(f[0], "FROM") {
			clear(env)
		}
		if len(f) < 2 || !strings.EqualFold(f[0], "ENV") {
			continue
		}
		for _, kv := range f[1:] {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = strings.Trim(v, `"`)
			}
		}
	}
	return env
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

// TestManifests decodes every manifest `kubectl apply -f kubernetes/`
// reads strictly into the Kubernetes API types, each a whole object, and
// checks that they fit together: the Service, the budget and the
// autoscaler select the Deployment's pods, the probes use /health (503
// while loading), Prometheus scrapes the keyless metrics port, and Mesa's
// shader cache is writable.
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
	if len(c.Ports) != 2 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 ||
		c.Ports[1].Name != "metrics" || c.Ports[1].ContainerPort != 9090 {
		t.Errorf("container ports %+v, want http 8080 and metrics 9090", c.Ports)
	}
	// Prometheus scrapes the --metrics-addr port, which needs no API key.
	if !contains(c.Args, "--metrics-addr=0.0.0.0:9090") || pod.Annotations["prometheus.io/port"] != "9090" {
		t.Errorf("args %q, scrape port %q: want --metrics-addr=0.0.0.0:9090 scraped on 9090", c.Args, pod.Annotations["prometheus.io/port"])
	}
	if !contains(c.Args, "--port=8080") || !contains(c.Args, "--host=0.0.0.0") || c.Args[0] != "serve" {
		t.Errorf("container args %q, want serve listening on 0.0.0.0:8080", c.Args)
	}

	// Mesa's shader cache directory of the image is a writable volume
	// (the root file system is read-only).
	cacheDir := dockerEnv(t)["MESA_SHADER_CACHE_DIR"]
	mounted := false
	for _, vm := range c.VolumeMounts {
		mounted = mounted || vm.MountPath == cacheDir && !vm.ReadOnly
	}
	if cacheDir == "" || !mounted {
		t.Errorf("the image's MESA_SHADER_CACHE_DIR %q is not a writable mount of the container (%+v)", cacheDir, c.VolumeMounts)
	}

	svc := m["service.yaml"].(*corev1.Service)
	if len(svc.Spec.Ports) != 1 {
		t.Errorf("the Service exposes %d ports, want only the API's (the metrics port is for the scraper)", len(svc.Spec.Ports))
	}
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

// TestWholeObjectsOnly checks that a strategic-merge patch (what the GPU
// files were before they became overlays) is refused as an object of the
// applied folder, while the Deployment it patches is accepted.
func TestWholeObjectsOnly(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("kubernetes-gpu", "nvidia", "patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeObjects("patch.yaml", raw); err == nil || !strings.Contains(err.Error(), "not a whole object") {
		t.Errorf("a patch decoded as a whole object: %v", err)
	}
	raw, err = os.ReadFile(filepath.Join("kubernetes", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeObjects("deployment.yaml", raw); err != nil {
		t.Errorf("the Deployment: %v", err)
	}
}

// kustomization is the part of kustomize's Kustomization the files use;
// decoded strictly, so another field is an error here until the test
// learns it.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Patches    []struct {
		Path string `json:"path"`
	} `json:"patches"`
}

func readKustomization(t *testing.T, path string) kustomization {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := decodeStrict(raw, &k); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("%s: apiVersion %q kind %q, want a kustomize.config.k8s.io/v1beta1 Kustomization", path, k.APIVersion, k.Kind)
	}
	return k
}

// TestKustomizeOverlays checks the kustomize base and the GPU overlays:
// the base (kubernetes/Kustomization, a name `kubectl apply -f` skips)
// lists exactly the files that `kubectl apply -f` applies; each overlay's
// resources and patches exist; each patch targets the base's Deployment
// and container and requests its vendor's GPU. Where kubectl is installed,
// `kubectl kustomize` builds each overlay and every object of its output
// decodes strictly as a whole object, the Deployment with the GPU and the
// base's arguments.
func TestKustomizeOverlays(t *testing.T) {
	base := readKustomization(t, filepath.Join("kubernetes", "Kustomization"))
	var want []string
	for _, f := range applied(t) {
		want = append(want, filepath.Base(f))
	}
	got := append([]string(nil), base.Resources...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("kubernetes/Kustomization lists %v, want the applied files %v", got, want)
	}
	dep := manifests(t)["deployment.yaml"].(*appsv1.Deployment)
	kubectl, kerr := exec.LookPath("kubectl")
	for vendor, resource := range map[string]corev1.ResourceName{
		"amd": "amd.com/gpu", "intel": "gpu.intel.com/i915", "nvidia": "nvidia.com/gpu",
	} {
		dir := filepath.Join("kubernetes-gpu", vendor)
		k := readKustomization(t, filepath.Join(dir, "kustomization.yaml"))
		for _, r := range k.Resources {
			if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
				t.Errorf("%s: resource %s: %v", dir, r, err)
			}
		}
		if len(k.Patches) != 1 {
			t.Fatalf("%s: %d patches, want 1", dir, len(k.Patches))
		}
		raw, err := os.ReadFile(filepath.Join(dir, k.Patches[0].Path))
		if err != nil {
			t.Fatalf("%s: patch: %v", dir, err)
		}
		var p appsv1.Deployment
		if err := decodeStrict(raw, &p); err != nil {
			t.Fatalf("%s: patch: %v", dir, err)
		}
		if p.Name != dep.Name || len(p.Spec.Template.Spec.Containers) != 1 || p.Spec.Template.Spec.Containers[0].Name != dep.Spec.Template.Spec.Containers[0].Name {
			t.Errorf("%s: the patch does not target the Deployment %s and its container", dir, dep.Name)
			continue
		}
		if q, ok := p.Spec.Template.Spec.Containers[0].Resources.Limits[resource]; !ok || q.Value() != 1 {
			t.Errorf("%s: the patch limits %v, want one %s", dir, p.Spec.Template.Spec.Containers[0].Resources.Limits, resource)
		}
		if kerr != nil {
			continue
		}
		out, err := exec.Command(kubectl, "kustomize", dir).Output()
		if err != nil {
			t.Errorf("kubectl kustomize %s: %v", dir, err)
			continue
		}
		objs, err := decodeObjects("kubectl kustomize "+dir, out)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(objs) != len(want) {
			t.Errorf("kubectl kustomize %s: %d objects, want %d", dir, len(objs), len(want))
		}
		for _, o := range objs {
			d, ok := o.(*appsv1.Deployment)
			if !ok {
				continue
			}
			c := d.Spec.Template.Spec.Containers[0]
			if q, ok := c.Resources.Limits[resource]; !ok || q.Value() != 1 || !slices.Equal(c.Args, dep.Spec.Template.Spec.Containers[0].Args) {
				t.Errorf("kubectl kustomize %s: the Deployment's limits %v and args %q, want one %s and the base's args", dir, c.Resources.Limits, c.Args, resource)
			}
		}
	}
	if kerr != nil {
		t.Log("kubectl not installed: the overlays were only checked file by file")
	}
}

// TestDockerfile checks the runtime image's instructions: the health check
// runs the image's own binary's health command (there is no curl), with a
// start period for the model's load; Mesa's shader cache directory is a
// volume the image's user owns; the Debian release is the one whose Mesa
// drives current GPUs (trixie: Mesa 25.0), as the README says.
func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	var stage []string // the last stage's instructions
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			stage = nil
		}
		stage = append(stage, line)
	}
	get := func(instr string) []string {
		var out []string
		for _, l := range stage {
			if strings.HasPrefix(l, instr+" ") {
				out = append(out, strings.TrimSpace(strings.TrimPrefix(l, instr+" ")))
			}
		}
		return out
	}
	if from := get("FROM"); len(from) != 1 || from[0] != "debian:trixie-slim" {
		t.Errorf("runtime FROM %q, want debian:trixie-slim (Mesa 25.0)", from)
	}
	hc := get("HEALTHCHECK")
	if len(hc) != 1 || !strings.Contains(hc[0], `CMD ["/usr/local/bin/vkllm", "health"]`) || !strings.Contains(hc[0], "--start-period=") {
		t.Errorf("HEALTHCHECK %q, want the exec form of /usr/local/bin/vkllm health with a start period", hc)
	}
	if !slices.ContainsFunc(get("COPY"), func(s string) bool { return strings.HasSuffix(s, " /usr/local/bin/vkllm") }) {
		t.Error("the binary the health check runs is not copied to /usr/local/bin/vkllm")
	}
	cache := dockerEnv(t)["MESA_SHADER_CACHE_DIR"]
	if v := get("VOLUME"); cache == "" || len(v) != 1 || v[0] != cache {
		t.Errorf("VOLUME %q, want MESA_SHADER_CACHE_DIR %q", v, cache)
	}
	if u := get("USER"); len(u) != 1 || u[0] != "10001:10001" {
		t.Errorf("USER %q, want 10001:10001", u)
	}
	if !slices.ContainsFunc(get("RUN"), func(s string) bool { return strings.Contains(s, "install -d -o 10001 -g 10001 "+cache) }) {
		t.Errorf("no RUN creates %s owned by the image's user", cache)
	}
}

// TestInferencePoolDoc checks the InferencePool instructions against the
// manifests: the helm command selects the Deployment's pods by their label
// and targets the API port, and the metrics port it names is the
// container's keyless one.
func TestInferencePoolDoc(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("inference-gateway", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	dep := manifests(t)["deployment.yaml"].(*appsv1.Deployment)
	m := regexp.MustCompile(`--set inferencePool\.modelServers\.matchLabels\.(\S+)=(\S+)`).FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("no matchLabels setting in the helm command")
	}
	key := strings.ReplaceAll(m[1], `\\.`, ".")
	if v := dep.Spec.Template.Labels[key]; v == "" || v != m[2] {
		t.Errorf("the pool selects %s=%s; the pods' labels are %v", key, m[2], dep.Spec.Template.Labels)
	}
	ports := map[string]int32{}
	for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = p.ContainerPort
	}
	if want := fmt.Sprintf("inferencePool.targetPortNumber=%d", ports["http"]); !strings.Contains(doc, want) {
		t.Errorf("the helm command lacks %s (the API port)", want)
	}
	if want := fmt.Sprintf("model-server-metrics-port=%d", ports["metrics"]); !strings.Contains(doc, want) {
		t.Errorf("the EPP setting lacks %s (the keyless metrics port)", want)
	}
}
