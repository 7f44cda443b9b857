// The Kubernetes manifests volley ships (deploy/kubernetes/) and the ones
// scripts/volley-kube renders, decoded strictly into Kubernetes' own types
// (an unknown or misspelt field, a wrong type or a duplicate key fails), then
// checked for what a sharded run needs: an Indexed Job of one pod per shard,
// each told the shard count and the common start, spread over nodes, with
// resources requested and the script mounted from the ConfigMap.
// SPDX-License-Identifier: MIT
package kube

import (
	"bytes"
	"os"
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
	if _, err := time.Parse(time.RFC3339, env(c, "VOLLEY_START_AT")); err != nil {
		t.Errorf("VOLLEY_START_AT: %v", err)
	}
	args := strings.Join(c.Args, " ")
	if len(c.Command) != 1 || c.Command[0] != "volley" ||
		!strings.HasPrefix(args, "--start-at $(VOLLEY_START_AT) --json - ") {
		t.Errorf("command %q, args %q", c.Command, args)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
			t.Errorf("no %s requested", r)
		}
	}
	return c
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

func TestShippedManifestDecodesStrictly(t *testing.T) {
	text, err := os.ReadFile("../../deploy/kubernetes/volley-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, text)
	checkScript(t, objs, checkJob(t, objs, 4))
}

func TestRenderedManifestDecodesStrictly(t *testing.T) {
	script := filepath.Join(t.TempDir(), "post.lua")
	if err := os.WriteFile(script, []byte("wrk.method = \"POST\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "../../scripts/volley-kube", "render", "--shards", "3",
		"--", "-t4", "-c", "300", "-R", "9000", "-d1m", "-s", script, "http://app:8080/")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("volley-kube render: %v: %s", err, stderr.String())
	}
	objs := decodeAll(t, out)
	c := checkJob(t, objs, 3)
	checkScript(t, objs, c)
	if cpu := c.Resources.Requests[corev1.ResourceCPU]; cpu.String() != "4" {
		t.Errorf("cpu request %s, want 4 for -t4", cpu.String())
	}
	if got := strings.Join(c.Args[6:], " "); got != "-t4 -c 300 -R 9000 -d1m http://app:8080/" {
		t.Errorf("volley options %q", got)
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
