// The Kubernetes manifests volley ships (deploy/kubernetes/) and the ones
// scripts/volley-kube renders, decoded strictly into Kubernetes' own types
// (an unknown or misspelt field, a wrong type or a duplicate key fails), then
// checked for what a sharded run needs: an Indexed Job of one pod per shard,
// each told the shard count and waiting for the common start, spread over
// nodes, ended by a deadline, with valid requests and limits, what the Pod
// Security Standard "restricted" asks, and the script mounted from the
// ConfigMap; and the shipped Job runs what volley-kube renders.
// SPDX-License-Identifier: MIT
package kube

import (
	"bytes"
	"os"
	"reflect"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

type objects struct {
	jobs       []batchv1.Job
	configMaps map[string]corev1.ConfigMap
}

// decode adds one document (YAML or JSON) to objs, strictly, by its kind.
func decode(t *testing.T, doc []byte, objs *objects) {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		t.Fatalf("not YAML: %v", err)
	}
	switch meta.APIVersion + " " + meta.Kind {
	case "v1 List":
		var list corev1.List
		if err := yaml.UnmarshalStrict(doc, &list); err != nil {
			t.Fatalf("List: %v", err)
		}
		for _, item := range list.Items {
			decode(t, item.Raw, objs)
		}
	case "batch/v1 Job":
		var job batchv1.Job
		if err := yaml.UnmarshalStrict(doc, &job); err != nil {
			t.Fatalf("Job: %v", err)
		}
		objs.jobs = append(objs.jobs, job)
	case "v1 ConfigMap":
		var cm corev1.ConfigMap
		if err := yaml.UnmarshalStrict(doc, &cm); err != nil {
			t.Fatalf("ConfigMap: %v", err)
		}
		objs.configMaps[cm.Name] = cm
	default:
		t.Fatalf("unexpected object %q %q", meta.APIVersion, meta.Kind)
	}
}

func decodeAll(t *testing.T, text []byte) objects {
	objs := objects{configMaps: map[string]corev1.ConfigMap{}}
	for _, doc := range regexp.MustCompile(`(?m)^---$`).Split(string(text), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")) != "" {
			decode(t, []byte(doc), &objs)
		}
	}
	if len(objs.jobs) != 1 {
		t.Fatalf("%d Jobs, want 1", len(objs.jobs))
	}
	return objs
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// checkJob checks the Job of objs runs shards pods, one shard each.
func checkJob(t *testing.T, objs objects, shards int32) corev1.Container {
	job := objs.jobs[0]
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("completionMode %v, want Indexed (JOB_COMPLETION_INDEX in each pod)", s.CompletionMode)
	}
	if s.Completions == nil || s.Parallelism == nil || *s.Completions != shards || *s.Parallelism != shards {
		t.Errorf("completions %v, parallelism %v, want both %d", s.Completions, s.Parallelism, shards)
	}
	if s.BackoffLimit == nil || *s.BackoffLimit != 0 {
		t.Errorf("backoffLimit %v, want 0: a shard is not run twice", s.BackoffLimit)
	}
	pod := s.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %q, want Never", pod.RestartPolicy)
	}
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil ||
		len(pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("no pod anti-affinity to spread the shards over nodes")
	}
	term := pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	if term.TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("anti-affinity topologyKey %q", term.TopologyKey)
	}
	for k, v := range term.LabelSelector.MatchLabels {
		if s.Template.Labels[k] != v {
			t.Errorf("anti-affinity selects %s=%s, which the pods do not have", k, v)
		}
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if n, err := strconv.Atoi(env(c, "VOLLEY_SHARDS")); err != nil || int32(n) != shards {
		t.Errorf("VOLLEY_SHARDS %q, want %d", env(c, "VOLLEY_SHARDS"), shards)
	}
	if at := env(c, "VOLLEY_START_AT"); at != "" {
		if _, err := time.Parse(time.RFC3339, at); err != nil {
			t.Errorf("VOLLEY_START_AT: %v", err)
		}
	}
	if len(c.Command) != 4 || c.Command[0] != "sh" || c.Command[1] != "-c" ||
		!strings.Contains(c.Command[2], `volley --start-at "$at" --json /run/volley-out/result.json "$@"`) ||
		strings.Contains(c.Command[2], "$(") || strings.Contains(c.Command[2], "$$") {
		t.Errorf("command %q", c.Command)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[r]; !ok || q.Sign() <= 0 {
			t.Errorf("no %s requested", r)
		}
		// Kubernetes refuses a request above its limit.
		if l, ok := c.Resources.Limits[r]; ok && l.Cmp(c.Resources.Requests[r]) < 0 {
			t.Errorf("%s requests %s, above its limit %s", r, c.Resources.Requests.Name(r, ""), l.String())
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Errorf("no memory limit")
	}
	if s.ActiveDeadlineSeconds == nil || *s.ActiveDeadlineSeconds <= 0 {
		t.Errorf("no activeDeadlineSeconds: pods waiting for a start that never comes would stay")
	}
	checkRestricted(t, pod, c)
	checkVolume(t, pod, c, "/run/volley-out", func(v corev1.VolumeSource) bool { return v.EmptyDir != nil })
	checkVolume(t, pod, c, "/run/volley-start", func(v corev1.VolumeSource) bool {
		return v.DownwardAPI != nil && len(v.DownwardAPI.Items) == 1 &&
			v.DownwardAPI.Items[0].Path == "start-at" && v.DownwardAPI.Items[0].FieldRef != nil &&
			v.DownwardAPI.Items[0].FieldRef.FieldPath == "metadata.annotations['volley/start-at']"
	})
	return c
}

// checkRestricted: what the Pod Security Standard "restricted" asks.
func checkRestricted(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	p, sc := pod.SecurityContext, c.SecurityContext
	if p == nil || p.RunAsNonRoot == nil || !*p.RunAsNonRoot || p.RunAsUser == nil || *p.RunAsUser == 0 ||
		p.SeccompProfile == nil || p.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot, a user other than root, RuntimeDefault seccomp", p)
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil ||
		!reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.Privileged != nil {
		t.Errorf("container securityContext %+v: want no privilege escalation, a read-only root, all capabilities dropped", sc)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Errorf("host namespaces")
	}
}

// checkVolume: the container mounts at path a volume that ok accepts.
func checkVolume(t *testing.T, pod corev1.PodSpec, c corev1.Container, path string, ok func(corev1.VolumeSource) bool) {
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if m.MountPath == path && v.Name == m.Name && ok(v.VolumeSource) {
				return
			}
		}
	}
	t.Errorf("no suitable volume mounted at %s", path)
}

// checkScript: -s names a file of the ConfigMap mounted in the container.
func checkScript(t *testing.T, objs objects, c corev1.Container) {
	script := ""
	for i, a := range c.Args {
		if a == "-s" && i+1 < len(c.Args) {
			script = c.Args[i+1]
		}
	}
	pod := objs.jobs[0].Spec.Template.Spec
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil || filepath.Dir(script) != m.MountPath {
				continue
			}
			cm, ok := objs.configMaps[v.ConfigMap.Name]
			if !ok {
				t.Fatalf("ConfigMap %q is not in the manifest", v.ConfigMap.Name)
			}
			if _, ok := cm.Data[filepath.Base(script)]; !ok {
				t.Fatalf("ConfigMap %q has no %q", cm.Name, filepath.Base(script))
			}
			return
		}
	}
	t.Fatalf("the script %q is not mounted from a ConfigMap", script)
}

func shipped(t *testing.T) objects {
	text, err := os.ReadFile("../../deploy/kubernetes/volley-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return decodeAll(t, text)
}

func render(t *testing.T, args ...string) objects {
	script := filepath.Join(t.TempDir(), "post.lua")
	if err := os.WriteFile(script, []byte("wrk.method = \"POST\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args = append([]string{"../../scripts/volley-kube", "render"}, args...)
	args = append(args, "--", "-t4", "-c", "300", "-R", "9000", "-d1m", "-s", script, "http://app:8080/")
	cmd := exec.Command("python3", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("volley-kube render: %v: %s", err, stderr.String())
	}
	return decodeAll(t, out)
}

func TestShippedManifestDecodesStrictly(t *testing.T) {
	objs := shipped(t)
	checkScript(t, objs, checkJob(t, objs, 4))
}

func TestRenderedManifestDecodesStrictly(t *testing.T) {
	objs := render(t, "--shards", "3")
	c := checkJob(t, objs, 3)
	checkScript(t, objs, c)
	if cpu := c.Resources.Requests[corev1.ResourceCPU]; cpu.String() != "4" {
		t.Errorf("cpu request %s, want 4 for -t4", cpu.String())
	}
	if got := strings.Join(c.Args[2:], " "); got != "-t4 -c 300 -R 9000 -d1m http://app:8080/" {
		t.Errorf("volley options %q", got)
	}
	c = checkJob(t, render(t, "--shards", "2", "--memory", "2Gi", "--cpu", "500m"), 2)
	if r := c.Resources; r.Requests.Memory().String() != "2Gi" || r.Limits.Memory().String() != "2Gi" ||
		r.Requests.Cpu().String() != "500m" {
		t.Errorf("--memory 2Gi --cpu 500m: resources %+v", r)
	}
}

// The shipped Job runs what volley-kube renders: the same command, security,
// and volumes for the start and the results.
func TestShippedManifestRunsWhatRenderRenders(t *testing.T) {
	a, b := shipped(t).jobs[0].Spec.Template.Spec, render(t, "--shards", "4").jobs[0].Spec.Template.Spec
	ca, cb := a.Containers[0], b.Containers[0]
	if !reflect.DeepEqual(ca.Command, cb.Command) {
		t.Errorf("command\n%q\nrenders as\n%q", ca.Command, cb.Command)
	}
	if !reflect.DeepEqual(ca.SecurityContext, cb.SecurityContext) || !reflect.DeepEqual(a.SecurityContext, b.SecurityContext) ||
		a.AutomountServiceAccountToken == nil || !reflect.DeepEqual(a.AutomountServiceAccountToken, b.AutomountServiceAccountToken) {
		t.Errorf("the security contexts differ from the rendered ones")
	}
	if !reflect.DeepEqual(a.Volumes[:2], b.Volumes[:2]) || !reflect.DeepEqual(ca.VolumeMounts[:2], cb.VolumeMounts[:2]) {
		t.Errorf("volumes %+v differ from the rendered %+v", a.Volumes, b.Volumes)
	}
}

// The strict decode is what catches mistakes: a misspelt field fails it.
func TestAMisspeltFieldFailsTheDecode(t *testing.T) {
	var job batchv1.Job
	err := yaml.UnmarshalStrict([]byte("apiVersion: batch/v1\nkind: Job\nspec:\n  completion: 4\n"), &job)
	if err == nil || !strings.Contains(err.Error(), "completion") {
		t.Fatalf("a misspelt field decoded: %v", err)
	}
}
