// The C++ side of reactccl.packetsim, compiled at import time by cppyy (the ns3 wheel's bindings).
//
// Everything that runs per packet stays here: routing by connection (a table filled from Python
// with the paths our topology's ECMP picks), ACK-first queueing, and a flow driver that writes each
// flow's bytes into its TCP connection once its dependencies have been delivered, counts delivered
// bytes at the receiver and starts dependent flows from a CSR table, so one epoch is one
// Simulator::Run. Python only builds the network, hands over tables and reads times back.

#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <cstdint>
#include <deque>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace reactpkt
{
using namespace ns3;

static const uint16_t kListenPort = 5000;

// Routes packets by connection: (src addr, dst addr, src port, dst port) -> interface.
class TableRouting : public Ipv4RoutingProtocol
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("reactpkt::TableRouting")
                                .SetParent<Ipv4RoutingProtocol>()
                                .SetGroupName("Internet")
                                .AddConstructor<TableRouting>();
        return tid;
    }

    void Add(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, uint32_t iface, Ipv4Address gw)
    {
        m_table[Key(src, dst, sport, dport)] = std::make_pair(iface, gw);
    }

    void SetPrimary(uint32_t iface, Ipv4Address gw)
    {
        m_primary = iface;
        m_primaryGw = gw;
    }

    uint64_t Unrouted() const { return m_unrouted; }

    Ptr<Ipv4Route> RouteOutput(Ptr<Packet> p, const Ipv4Header& h, Ptr<NetDevice> oif,
                               Socket::SocketErrno& err) override
    {
        uint32_t iface = m_primary;
        Ipv4Address gw = m_primaryGw;
        if (p && p->GetSize() >= 4)
        {
            // locally originated: our sockets are bound to the primary address (the header's
            // source is not filled in yet when TCP asks for a route)
            uint32_t self = m_ipv4->GetAddress(m_primary, 0).GetLocal().Get();
            auto it = m_table.find(Key(self, h.GetDestination().Get(), Ports(p)));
            if (it == m_table.end())
            {
                m_unrouted++;
                if (getenv("REACTPKT_DEBUG")) std::cerr << "unrouted out " << h.GetSource() << " " << h.GetDestination() << " " << Ports(p).first << " " << Ports(p).second << " size " << p->GetSize() << " table " << m_table.size() << std::endl;
                err = Socket::ERROR_NOROUTETOHOST;
                return nullptr;
            }
            iface = it->second.first;
            gw = it->second.second;
        }
        err = Socket::ERROR_NOTERROR;
        return MakeRoute(h, iface, gw);
    }

    bool RouteInput(Ptr<const Packet> p, const Ipv4Header& h, Ptr<const NetDevice> idev,
                    const UnicastForwardCallback& ucb, const MulticastForwardCallback& mcb,
                    const LocalDeliverCallback& lcb, const ErrorCallback& ecb) override
    {
        uint32_t iif = m_ipv4->GetInterfaceForDevice(idev);
        if (m_ipv4->IsDestinationAddress(h.GetDestination(), iif))
        {
            if (!lcb.IsNull())
            {
                lcb(p, h, iif);
                return true;
            }
            return false;
        }
        if (p->GetSize() < 4)
        {
            m_unrouted++;
            return false;
        }
        auto it = m_table.find(Key(h.GetSource().Get(), h.GetDestination().Get(), Ports(p)));
        if (it == m_table.end())
        {
            m_unrouted++;
            if (getenv("REACTPKT_DEBUG")) std::cerr << "unrouted in " << h.GetSource() << " " << h.GetDestination() << " " << Ports(p).first << " " << Ports(p).second << " size " << p->GetSize() << " table " << m_table.size() << std::endl;
            return false;
        }
        ucb(MakeRoute(h, it->second.first, it->second.second), p, h);
        return true;
    }

    void NotifyInterfaceUp(uint32_t) override {}
    void NotifyInterfaceDown(uint32_t) override {}
    void NotifyAddAddress(uint32_t, Ipv4InterfaceAddress) override {}
    void NotifyRemoveAddress(uint32_t, Ipv4InterfaceAddress) override {}
    void SetIpv4(Ptr<Ipv4> ipv4) override { m_ipv4 = ipv4; }
    void PrintRoutingTable(Ptr<OutputStreamWrapper> stream, Time::Unit) const override
    {
        *stream->GetStream() << "reactpkt::TableRouting with " << m_table.size() << " entries\n";
    }

  private:
    typedef std::pair<uint64_t, uint32_t> TableKey;

    static TableKey Key(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport)
    {
        return TableKey((uint64_t(src) << 32) | dst, (uint32_t(sport) << 16) | dport);
    }

    static TableKey Key(uint32_t src, uint32_t dst, std::pair<uint16_t, uint16_t> ports)
    {
        return Key(src, dst, ports.first, ports.second);
    }

    static std::pair<uint16_t, uint16_t> Ports(Ptr<const Packet> p)
    {
        uint8_t b[4];
        p->CopyData(b, 4);  // the TCP header leads: source port, destination port (network order)
        return std::make_pair(uint16_t((b[0] << 8) | b[1]), uint16_t((b[2] << 8) | b[3]));
    }

    Ptr<Ipv4Route> MakeRoute(const Ipv4Header& h, uint32_t iface, Ipv4Address gw) const
    {
        Ptr<Ipv4Route> r = Create<Ipv4Route>();
        r->SetDestination(h.GetDestination());
        r->SetSource(m_ipv4->GetAddress(m_primary, 0).GetLocal());
        r->SetGateway(gw);
        r->SetOutputDevice(m_ipv4->GetNetDevice(iface));
        return r;
    }

    Ptr<Ipv4> m_ipv4;
    std::map<TableKey, std::pair<uint32_t, Ipv4Address>> m_table;
    uint32_t m_primary = 1;
    Ipv4Address m_primaryGw;
    uint64_t m_unrouted = 0;
};

// Puts pure ACKs (an IPv4 payload no longer than a TCP header with options) in band 0 of a
// PrioQueueDisc, everything else in band 1 (REACT §7.3: "prioritize ACKs in switch queues").
class AckFilter : public Ipv4PacketFilter
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("reactpkt::AckFilter")
                                .SetParent<Ipv4PacketFilter>()
                                .SetGroupName("TrafficControl")
                                .AddConstructor<AckFilter>();
        return tid;
    }

  private:
    int32_t DoClassify(Ptr<QueueDiscItem> item) const override
    {
        Ptr<Ipv4QueueDiscItem> i4 = DynamicCast<Ipv4QueueDiscItem>(item);
        if (!i4)
        {
            return PacketFilter::PF_NO_MATCH;
        }
        return i4->GetHeader().GetPayloadSize() <= 60 ? 0 : 1;
    }
};

struct Conn
{
    uint32_t src = 0, dst = 0;
    uint16_t sport = 0;
    Ptr<Socket> tx, rx;
    bool connected = false;
    bool infinite = false;  // a long-lived background flow: always has bytes to send
    uint64_t toSend = 0;    // bytes not yet handed to the socket
    uint64_t written = 0;   // bytes of flows queued on this connection so far
    uint64_t rxBytes = 0;   // bytes delivered in order to the receiver
    std::deque<std::pair<int, uint64_t>> pending;  // (flow, cumulative end offset) in write order
};

class Net
{
  public:
    Net()
    {
        TableRouting::GetTypeId();
        AckFilter::GetTypeId();
    }

    // ------------------------------------------------------------------ building
    int AddNode()
    {
        m_nodes.Create(1);
        return int(m_nodes.GetN()) - 1;
    }

    // qdisc: "default" (ns-3's root qdisc, FqCoDel), "red" (RED on every port, attributes from
    // Config defaults), "prio-red" (ACKs first, then RED). deviceQueue: packets in each device's
    // drop-tail queue under the qdisc (0 = ns-3's default, 100).
    void SetQueueing(const std::string& qdisc, uint32_t deviceQueue)
    {
        m_qdisc = qdisc;
        m_deviceQueue = deviceQueue;
    }

    void AddCable(int u, int v, int linkUV, int linkVU, double rateUV, double rateVU, double delay)
    {
        m_cables.push_back({u, v, linkUV, linkVU, rateUV, rateVU, delay});
    }

    void Build()
    {
        if (m_built)
        {
            throw std::runtime_error("Net::Build: already built");
        }
        m_built = true;
        InternetStackHelper stack;
        stack.Install(m_nodes);
        Ipv4AddressHelper addr;
        addr.SetBase("10.0.0.0", "255.255.255.252");
        int maxLink = -1;
        for (auto& c : m_cables)
        {
            maxLink = std::max(maxLink, std::max(c.linkUV, c.linkVU));
        }
        m_linkNode.assign(maxLink + 1, -1);
        m_linkIface.assign(maxLink + 1, 0);
        m_linkHead.assign(maxLink + 1, -1);
        m_linkGw.assign(maxLink + 1, Ipv4Address());
        m_reverse.assign(maxLink + 1, -1);
        for (auto& c : m_cables)
        {
            if (c.linkUV >= 0)
                m_reverse[c.linkUV] = c.linkVU;
            if (c.linkVU >= 0)
                m_reverse[c.linkVU] = c.linkUV;
        }
        std::vector<bool> hasPrimary(m_nodes.GetN(), false);
        m_primaryAddr.assign(m_nodes.GetN(), Ipv4Address());
        std::vector<uint32_t> primaryIface(m_nodes.GetN(), 1);
        std::vector<Ipv4Address> primaryGw(m_nodes.GetN(), Ipv4Address());
        for (auto& c : m_cables)
        {
            PointToPointHelper p2p;
            p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(uint64_t(c.rateUV))));
            p2p.SetChannelAttribute("Delay", TimeValue(Seconds(c.delay)));
            if (m_deviceQueue > 0)
            {
                p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize",
                             QueueSizeValue(QueueSize(std::to_string(m_deviceQueue) + "p")));
            }
            NetDeviceContainer devs = p2p.Install(m_nodes.Get(c.u), m_nodes.Get(c.v));
            devs.Get(1)->SetAttribute("DataRate", DataRateValue(DataRate(uint64_t(c.rateVU))));
            for (uint32_t i = 0; i < 2; i++)
            {
                devs.Get(i)->TraceConnectWithoutContext("PhyTxEnd", MakeCallback(&Net::OnTx, this));
            }
            InstallQdisc(devs);
            // devices are created u end first, addresses go v end first (the default qdisc, which
            // Assign installs, in that order too): the order the reference scenarios were built in,
            // which fixes ns-3's random streams (RED marking, FqCoDel's hash perturbation)
            Ipv4InterfaceContainer byV = addr.Assign(NetDeviceContainer(devs.Get(1), devs.Get(0)));
            Ipv4InterfaceContainer ifc;
            ifc.Add(byV.Get(1));
            ifc.Add(byV.Get(0));
            addr.NewNetwork();
            int ends[2] = {c.u, c.v};
            int links[2] = {c.linkUV, c.linkVU};
            for (int i = 0; i < 2; i++)
            {
                int node = ends[i];
                Ptr<Ipv4> ipv4 = m_nodes.Get(node)->GetObject<Ipv4>();
                uint32_t iface = ipv4->GetInterfaceForDevice(devs.Get(i));
                Ipv4Address peer = ifc.GetAddress(1 - i);
                if (links[i] >= 0)
                {
                    m_linkNode[links[i]] = node;
                    m_linkIface[links[i]] = iface;
                    m_linkHead[links[i]] = ends[1 - i];
                    m_linkGw[links[i]] = peer;
                }
                if (!hasPrimary[node])
                {
                    hasPrimary[node] = true;
                    m_primaryAddr[node] = ifc.GetAddress(i);
                    primaryIface[node] = iface;
                    primaryGw[node] = peer;
                }
            }
        }
        m_routing.clear();
        for (uint32_t n = 0; n < m_nodes.GetN(); n++)
        {
            Ptr<TableRouting> r = CreateObject<TableRouting>();
            r->SetPrimary(primaryIface[n], primaryGw[n]);
            m_nodes.Get(n)->GetObject<Ipv4>()->SetRoutingProtocol(r);
            m_routing.push_back(r);
        }
        m_listener.assign(m_nodes.GetN(), nullptr);
        m_nextPort.assign(m_nodes.GetN(), 10000);
    }

    // ------------------------------------------------------------- connections
    // Opens a TCP connection src -> dst along the directed links `path` (the ACKs take the reverse
    // cables); returns its id. The SYN leaves at the current simulated time.
    int Open(int src, int dst, const std::vector<int>& path)
    {
        if (!m_built)
        {
            throw std::runtime_error("Net::Open: call Build first");
        }
        CheckPath(src, dst, path);
        if (m_nextPort[src] >= 65535)
        {
            throw std::runtime_error("Net::Open: node " + std::to_string(src) + " ran out of ports");
        }
        int id = int(m_conns.size());
        m_conns.emplace_back();
        Conn& c = m_conns.back();
        c.src = src;
        c.dst = dst;
        c.sport = uint16_t(m_nextPort[src]++);
        uint32_t sa = m_primaryAddr[src].Get(), da = m_primaryAddr[dst].Get();
        for (int l : path)
        {
            m_routing[m_linkNode[l]]->Add(sa, da, c.sport, kListenPort, m_linkIface[l], m_linkGw[l]);
            int r = Reverse(l);
            m_routing[m_linkNode[r]]->Add(da, sa, kListenPort, c.sport, m_linkIface[r], m_linkGw[r]);
        }
        m_byPeer[std::make_pair(sa, c.sport)] = id;
        m_unconnected++;
        // inside Simulator::Run, so the nodes (and their traffic control) are initialised first
        Simulator::ScheduleNow(&Net::DoConnect, this, id);
        return id;
    }

    // A long-lived flow on connection `id`: it always has bytes to send.
    void SetInfinite(int id)
    {
        m_conns.at(id).infinite = true;
        Push(id);
    }

    // `bytes` more to send on connection `id` every `period` s from `first` s after now.
    void AddBulk(int id, double bytes, double first, double period)
    {
        m_conns.at(id);
        Simulator::Schedule(Seconds(first), &Net::BulkFire, this, id, uint64_t(bytes + 0.5), period);
    }

    int Unconnected() const { return m_unconnected; }

    int Failed() const { return m_failed; }

    // Runs until every opened connection is established or `limit` s have passed; true when all are.
    bool WaitConnected(double limit)
    {
        if (m_unconnected == 0)
        {
            return true;
        }
        m_waitingConnect = true;
        EventId ev = Simulator::Schedule(Seconds(limit), &Net::StopNow, this);
        Simulator::Run();
        ev.Cancel();
        m_waitingConnect = false;
        return m_unconnected == 0;
    }

    void RunFor(double seconds)
    {
        Simulator::Stop(Seconds(seconds));
        Simulator::Run();
    }

    // ------------------------------------------------------------------- epochs
    // One epoch: flow f writes bytes[f] into connection conn[f] once waiting[f] flows among those
    // whose child lists (CSR childPtr/child) name it have been delivered; flows with waiting 0 start
    // now. Runs until every flow is delivered (true) or `limit` s of simulated time have passed
    // (false; the flows left are those with end < 0).
    bool RunEpoch(const std::vector<int>& conn, const std::vector<double>& bytes, const std::vector<int>& waiting,
                  const std::vector<int>& childPtr, const std::vector<int>& child, double limit)
    {
        size_t F = conn.size();
        if (bytes.size() != F || waiting.size() != F || childPtr.size() != F + 1)
        {
            throw std::runtime_error("Net::RunEpoch: flow arrays of different lengths");
        }
        for (size_t f = 0; f < F; f++)
        {
            if (conn[f] < 0 || size_t(conn[f]) >= m_conns.size())
            {
                throw std::runtime_error("Net::RunEpoch: flow " + std::to_string(f) + " names no connection");
            }
        }
        m_flowConn = conn;
        m_flowBytes.resize(F);
        for (size_t f = 0; f < F; f++)
        {
            m_flowBytes[f] = bytes[f] > 0 ? uint64_t(bytes[f] + 0.5) : 0;
        }
        m_waiting = waiting;
        m_childPtr = childPtr;
        m_child = child;
        start.assign(F, -1.0);
        end.assign(F, -1.0);
        m_done = 0;
        m_timedOut = false;
        epochStart = Simulator::Now().GetSeconds();
        if (F == 0)
        {
            return true;
        }
        m_inEpoch = true;
        EventId ev = Simulator::Schedule(Seconds(limit), &Net::OnTimeout, this);
        for (size_t f = 0; f < F; f++)
        {
            if (m_waiting[f] == 0)
            {
                Simulator::ScheduleNow(&Net::StartFlow, this, int(f));
            }
        }
        Simulator::Run();
        ev.Cancel();
        m_inEpoch = false;
        return !m_timedOut && m_done == F;
    }

    // Bytes delivered so far on connection `id`, and bytes its flows have queued on it.
    uint64_t Delivered(int id) const { return m_conns.at(id).rxBytes; }

    uint64_t Queued(int id) const { return m_conns.at(id).written; }

    uint64_t Unrouted() const
    {
        uint64_t n = 0;
        for (auto& r : m_routing)
        {
            n += r->Unrouted();
        }
        return n;
    }

    std::vector<double> start, end;
    double epochStart = 0;
    uint64_t packets = 0;  // packets put on the wire (every hop counts)

  private:
    struct Cable
    {
        int u, v, linkUV, linkVU;
        double rateUV, rateVU, delay;
    };

    void InstallQdisc(NetDeviceContainer& devs)
    {
        if (m_qdisc == "default")
        {
            return;  // Ipv4AddressHelper::Assign installs ns-3's default root qdisc
        }
        TrafficControlHelper tch;
        if (m_qdisc == "red")
        {
            tch.SetRootQueueDisc("ns3::RedQueueDisc");
        }
        else if (m_qdisc == "prio-red")
        {
            uint16_t h = tch.SetRootQueueDisc("ns3::PrioQueueDisc", "Priomap",
                                              StringValue("1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1"));
            tch.AddPacketFilter(h, "reactpkt::AckFilter");
            TrafficControlHelper::ClassIdList cls = tch.AddQueueDiscClasses(h, 2, "ns3::QueueDiscClass");
            tch.AddChildQueueDisc(h, cls[0], "ns3::FifoQueueDisc");
            tch.AddChildQueueDisc(h, cls[1], "ns3::RedQueueDisc");
        }
        else
        {
            throw std::runtime_error("Net: unknown qdisc '" + m_qdisc + "'");
        }
        tch.Install(devs);
    }

    int Reverse(int l) const { return (l >= 0 && size_t(l) < m_reverse.size()) ? m_reverse[l] : -1; }

    void CheckPath(int src, int dst, const std::vector<int>& path) const
    {
        if (path.empty())
        {
            throw std::runtime_error("Net::Open: empty path from node " + std::to_string(src));
        }
        int at = src;
        for (int l : path)
        {
            if (l < 0 || size_t(l) >= m_linkNode.size() || m_linkNode[l] < 0)
            {
                throw std::runtime_error("Net::Open: unknown link " + std::to_string(l));
            }
            if (m_linkNode[l] != at)
            {
                throw std::runtime_error("Net::Open: link " + std::to_string(l) + " does not leave node " +
                                         std::to_string(at));
            }
            if (Reverse(l) < 0)
            {
                throw std::runtime_error("Net::Open: link " + std::to_string(l) + " has no reverse for ACKs");
            }
            at = m_linkHead[l];
        }
        if (at != dst)
        {
            throw std::runtime_error("Net::Open: path ends at node " + std::to_string(at) + ", not " +
                                     std::to_string(dst));
        }
    }

    void Listen(int node)
    {
        if (m_listener[node])
        {
            return;
        }
        Ptr<Socket> s = Socket::CreateSocket(m_nodes.Get(node), TcpSocketFactory::GetTypeId());
        s->Bind(InetSocketAddress(Ipv4Address::GetAny(), kListenPort));
        s->Listen();
        s->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                             MakeCallback(&Net::OnAccept, this));
        m_listener[node] = s;
    }

    void DoConnect(int id)
    {
        Conn& c = m_conns[id];
        Listen(c.dst);
        c.tx = Socket::CreateSocket(m_nodes.Get(c.src), TcpSocketFactory::GetTypeId());
        c.tx->Bind(InetSocketAddress(m_primaryAddr[c.src], c.sport));
        c.tx->SetConnectCallback(MakeCallback(&Net::OnConnected, this), MakeCallback(&Net::OnConnectFailed, this));
        c.tx->SetSendCallback(MakeCallback(&Net::OnSendSpace, this));
        m_bySocket[PeekPointer(c.tx)] = id;
        c.tx->Connect(InetSocketAddress(m_primaryAddr[c.dst], kListenPort));
    }

    void OnAccept(Ptr<Socket> s, const Address& from)
    {
        InetSocketAddress a = InetSocketAddress::ConvertFrom(from);
        auto it = m_byPeer.find(std::make_pair(a.GetIpv4().Get(), a.GetPort()));
        if (it == m_byPeer.end())
        {
            return;
        }
        Conn& c = m_conns[it->second];
        c.rx = s;
        m_bySocket[PeekPointer(s)] = it->second;
        s->SetRecvCallback(MakeCallback(&Net::OnRecv, this));
        OnRecv(s);
    }

    void OnConnected(Ptr<Socket> s)
    {
        int id = m_bySocket[PeekPointer(s)];
        Conn& c = m_conns[id];
        if (!c.connected)
        {
            c.connected = true;
            m_unconnected--;
        }
        Push(id);
        if (m_waitingConnect && m_unconnected == 0)
        {
            Simulator::Stop();
        }
    }

    void OnConnectFailed(Ptr<Socket> s)
    {
        m_failed++;
    }

    void OnSendSpace(Ptr<Socket> s, uint32_t)
    {
        Push(m_bySocket[PeekPointer(s)]);
    }

    void Push(int id)
    {
        Conn& c = m_conns[id];
        if (!c.connected)
        {
            return;
        }
        while (c.infinite || c.toSend > 0)
        {
            uint32_t avail = c.tx->GetTxAvailable();
            if (avail == 0)
            {
                break;
            }
            uint64_t n = c.infinite ? avail : std::min<uint64_t>(c.toSend, avail);
            if (c.tx->Send(Create<Packet>(uint32_t(n))) < 0)
            {
                break;
            }
            if (!c.infinite)
            {
                c.toSend -= n;
            }
        }
    }

    void OnRecv(Ptr<Socket> s)
    {
        auto it = m_bySocket.find(PeekPointer(s));
        if (it == m_bySocket.end())
        {
            return;
        }
        Conn& c = m_conns[it->second];
        Ptr<Packet> p;
        while ((p = s->Recv()) && p->GetSize() > 0)
        {
            c.rxBytes += p->GetSize();
        }
        while (!c.pending.empty() && c.pending.front().second <= c.rxBytes)
        {
            int f = c.pending.front().first;
            c.pending.pop_front();
            FlowDone(f);
        }
    }

    void StartFlow(int f)
    {
        start[f] = Simulator::Now().GetSeconds() - epochStart;
        uint64_t n = m_flowBytes[f];
        if (n == 0)
        {
            FlowDone(f);
            return;
        }
        int id = m_flowConn[f];
        Conn& c = m_conns[id];
        c.written += n;
        c.toSend += n;
        c.pending.emplace_back(f, c.written);
        Push(id);
    }

    void FlowDone(int f)
    {
        if (!m_inEpoch || end[f] >= 0)
        {
            return;
        }
        end[f] = Simulator::Now().GetSeconds() - epochStart;
        m_done++;
        for (int k = m_childPtr[f]; k < m_childPtr[f + 1]; k++)
        {
            int ch = m_child[k];
            if (--m_waiting[ch] == 0)
            {
                StartFlow(ch);
            }
        }
        if (m_done == m_flowConn.size())
        {
            Simulator::Stop();
        }
    }

    void BulkFire(int id, uint64_t bytes, double period)
    {
        m_conns[id].toSend += bytes;
        Push(id);
        Simulator::Schedule(Seconds(period), &Net::BulkFire, this, id, bytes, period);
    }

    void OnTimeout()
    {
        m_timedOut = true;
        Simulator::Stop();
    }

    void StopNow() { Simulator::Stop(); }

    void OnTx(Ptr<const Packet>) { packets++; }

    NodeContainer m_nodes;
    std::vector<Cable> m_cables;
    std::string m_qdisc = "default";
    uint32_t m_deviceQueue = 0;
    bool m_built = false;
    std::vector<int> m_linkNode, m_linkHead, m_reverse;
    std::vector<uint32_t> m_linkIface;
    std::vector<Ipv4Address> m_linkGw;
    std::vector<Ipv4Address> m_primaryAddr;
    std::vector<Ptr<TableRouting>> m_routing;
    std::vector<Ptr<Socket>> m_listener;
    std::vector<uint32_t> m_nextPort;
    std::vector<Conn> m_conns;
    std::map<std::pair<uint32_t, uint16_t>, int> m_byPeer;
    std::unordered_map<Socket*, int> m_bySocket;
    int m_unconnected = 0;
    int m_failed = 0;
    bool m_waitingConnect = false;
    // epoch state
    std::vector<int> m_flowConn, m_waiting, m_childPtr, m_child;
    std::vector<uint64_t> m_flowBytes;
    size_t m_done = 0;
    bool m_timedOut = false;
    bool m_inEpoch = false;
};

} // namespace reactpkt
