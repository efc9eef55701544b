module kubelease.invalid/controlplane

go 1.22
