# FB_Hadoop flow sizes: the Hadoop cluster of Roy et al., "Inside the Social Network's
# (Datacenter) Network", SIGCOMM 2015, as used by HPCC (SIGCOMM 2019).
# Points as distributed in alibaba-edu/High-Precision-Congestion-Control traffic_gen/ (2020),
# file FbHdp_distribution.txt.
# Format: one point per line, `<flow size in bytes> <cumulative percent>`; first `0 0`, last
# percent 100, both columns strictly increasing; sizes between points by linear interpolation.
# Mean (trapezoid rule): 120421 bytes.
0 0
100 1
200 2
300 5
350 15
400 20
500 30
600 40
700 50
1000 60
2000 67
7000 70
30000 72
50000 82
80000 87
120000 90
300000 95
1000000 97.5
2000000 99
10000000 100
