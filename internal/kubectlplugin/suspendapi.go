package kubectlplugin

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// SwitchAPI is what suspend, resume, status and doctor need of the
// operator's suspend switch, a ConfigMap: an API that lacks it (a test's
// fake) has no switch to show or write.
type SwitchAPI interface {
	// GetConfigMap reads one ConfigMap; nil, nil when there is none.
	GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	// ApplyConfigMap creates cm, or replaces the data of the one there;
	// created says which.
	ApplyConfigMap(ctx context.Context, cm *corev1.ConfigMap) (created bool, err error)
	// DeleteConfigMap deletes one ConfigMap; gone is false when there was none.
	DeleteConfigMap(ctx context.Context, namespace, name string) (gone bool, err error)
	// User is who the API server takes the caller for ("" when it cannot say).
	User(ctx context.Context) string
}

var _ SwitchAPI = (*kubeAPI)(nil)

func (a *kubeAPI) GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	cm, err := a.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, explain(err, "get", "configmaps", namespace+"/"+name)
	}
	return cm, nil
}

func (a *kubeAPI) ApplyConfigMap(ctx context.Context, cm *corev1.ConfigMap) (bool, error) {
	cms := a.client.CoreV1().ConfigMaps(cm.Namespace)
	_, err := cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: api.FieldManagerKubectlPlugin})
	if err == nil {
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return false, explain(err, "create", "configmaps", cm.Namespace+"/"+cm.Name)
	}
	old, err := cms.Get(ctx, cm.Name, metav1.GetOptions{})
	if err != nil {
		return false, explain(err, "get", "configmaps", cm.Namespace+"/"+cm.Name)
	}
	old.Data = cm.Data
	if _, err := cms.Update(ctx, old, metav1.UpdateOptions{FieldManager: api.FieldManagerKubectlPlugin}); err != nil {
		return false, explain(err, "update", "configmaps", cm.Namespace+"/"+cm.Name)
	}
	return false, nil
}

func (a *kubeAPI) DeleteConfigMap(ctx context.Context, namespace, name string) (bool, error) {
	err := a.client.CoreV1().ConfigMaps(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, explain(err, "delete", "configmaps", namespace+"/"+name)
	}
	return true, nil
}

func (a *kubeAPI) User(ctx context.Context) string {
	r, err := a.client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return ""
	}
	return r.Status.UserInfo.Username
}
